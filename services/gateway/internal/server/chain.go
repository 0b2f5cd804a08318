package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/services/gateway/internal/authn"
)

// filter is one step every request passes through before it is routed.
type filter struct {
	name string
	wrap echo.MiddlewareFunc
}

// filters are the steps of s's handler chain, outermost first: a
// request meets them in this order. Panic recovery comes first so that
// nothing escapes it; request info next, as every later step reads it;
// metrics outside the limits so that their 429, 413 and 504 answers are
// counted; authentication before max-in-flight, which lets
// system:masters through beyond the limit; the body limit inside the
// timeout, since it may read a body; authorization last.
func (s *Server) filters() []filter {
	return []filter{
		{"panicrecovery", s.recoverPanic},
		{"requestinfo", withRequestInfo},
		{"metrics", s.limits.Metrics()},
		{"endlongrunningonshutdown", s.limits.EndLongRunningOnShutdown()},
		{"authentication", s.authenticate},
		{"maxinflight", s.limits.MaxInFlight()},
		{"timeout", s.limits.Timeout()},
		{"bodylimit", s.limits.BodyLimit()},
		{"authorization", authorize},
	}
}

// recoverPanic answers a handler's panic with kube's 500 Status and logs
// it, so that one bad request does not end the process. The proxy's
// http.ErrAbortHandler, which aborts a response already begun, is passed
// on to the HTTP server that knows to drop the connection.
func (s *Server) recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if e, ok := p.(error); ok && errors.Is(e, http.ErrAbortHandler) {
				panic(p)
			}
			r := c.Request()
			s.log.Error("panic serving request", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(p))
			err = apistatus.Write(c, apierrors.NewInternalError(fmt.Errorf("%v", p)))
		}()
		return next(c)
	}
}

// privileged reports whether c's user is served beyond the max-in-flight
// limits, as kube serves system:masters.
func privileged(c echo.Context) bool {
	u, ok := frontproxy.UserFrom(c.Request().Context())
	return ok && slices.Contains(u.Groups, authn.SystemMasters)
}

// requestInfo is the request info withRequestInfo parsed, for the
// filters.
func requestInfo(c echo.Context) *requestinfo.Info {
	if info := infoFrom(c.Request().Context()); info != nil {
		return info
	}
	r := c.Request()
	return requestinfo.Parse(r.Method, r.URL)
}

// public reports whether path is open to anyone, as kube's
// system:public-info-viewer role opens it to unauthenticated clients.
func public(path string) bool {
	switch path {
	case "/healthz", "/livez", "/readyz", "/version", "/version/":
		return true
	}
	return false
}

type infoKey struct{}

func infoFrom(ctx context.Context) *requestinfo.Info {
	info, _ := ctx.Value(infoKey{}).(*requestinfo.Info)
	return info
}

func withRequestInfo(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		info := requestinfo.Parse(r.Method, r.URL)
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), infoKey{}, info)))
		return next(c)
	}
}

func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		u, ok := s.authn.Authenticate(r)
		if !ok {
			if !public(r.URL.Path) {
				return apistatus.Write(c, authn.Unauthorized())
			}
			u = &frontproxy.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}
		}
		c.SetRequest(r.WithContext(frontproxy.WithUser(r.Context(), u)))
		return next(c)
	}
}

func authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if public(r.URL.Path) {
			return next(c)
		}
		u, _ := frontproxy.UserFrom(r.Context())
		if err := authn.Authorize(u, infoFrom(r.Context())); err != nil {
			return apistatus.Write(c, err)
		}
		return next(c)
	}
}
