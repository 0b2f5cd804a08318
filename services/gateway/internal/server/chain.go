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
	"kplane.dev/services/gateway/internal/audit"
	"kplane.dev/services/gateway/internal/authz"
	"kplane.dev/services/gateway/internal/impersonation"
)

// filter is one step every request passes through before it is routed.
type filter struct {
	name string
	wrap echo.MiddlewareFunc
}

// filters are the steps of s's handler chain, outermost first: a
// request meets them in this order. The audit ID comes first, as kube's
// audit init, so that every answer carries it and the access log can
// name it. The access log next, so that its line has the code of every
// answer, a recovered panic's 500 included; panic recovery next so that
// nothing past it escapes; request info next, as every later step reads
// it, and tracing, which describes the request on its span;
// metrics outside the limits so that their 429, 413 and 504 answers are
// counted; the timeout before anything that waits on the client or on
// authn and authz, as kube's request deadline is, and it also sets the
// read deadline of the body. Then who may do what, audited from the
// moment the user is known, as kube audits: before any byte of the
// body is read and before any limit is taken, so that a request that will
// be refused (an anonymous write) is refused at once and holds nothing:
// authentication, impersonation (which authorizes the impersonate verb
// itself), authorization. Then the limits, which let the resulting
// system:masters through: max-in-flight, the per-user limit of
// long-running requests, and last the body limit, which streams the
// body to the proxy.
func (s *Server) filters() []filter {
	return []filter{
		{"auditid", audit.WithID},
		{"accesslog", s.limits.AccessLog()},
		{"panicrecovery", s.recoverPanic},
		{"requestinfo", withRequestInfo},
		{"tracing", traceRequest},
		{"metrics", s.limits.Metrics()},
		{"endlongrunningonshutdown", s.limits.EndLongRunningOnShutdown()},
		{"timeout", s.limits.Timeout()},
		{"authentication", s.authenticate},
		{"audit", s.audit},
		{"impersonation", s.impersonate},
		{"authorization", s.authorize},
		{"maxinflight", s.limits.MaxInFlight()},
		{"longrunningperuser", s.limits.LongRunningPerUser()},
		{"bodylimit", s.limits.BodyLimit()},
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
	return ok && slices.Contains(u.Groups, authz.SystemMasters)
}

// userName is the name of c's user, for the per-user limits.
func userName(c echo.Context) string {
	u, _ := frontproxy.UserFrom(c.Request().Context())
	if u == nil {
		return ""
	}
	return u.Name
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

// authenticate names the request's user, or answers kube's 401.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		u, err := s.authn.Authenticate(r)
		if err != nil {
			werr := apistatus.Write(c, err)
			if s.auditor != nil {
				s.auditor.FailedAuthentication(c)
			}
			return werr
		}
		c.SetRequest(r.WithContext(frontproxy.WithUser(r.Context(), u)))
		return next(c)
	}
}

// impersonate switches to the user the impersonation headers ask for,
// each part authorized with the impersonate verb.
func (s *Server) impersonate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		requestor, _ := frontproxy.UserFrom(r.Context())
		u, err := impersonation.Impersonate(r.Context(), s.authz, requestor, r.Header)
		if err != nil {
			return apistatus.Write(c, err)
		}
		if u != nil {
			s.log.Debug("impersonating", "user", requestor.Name, "as", u.Name)
			audit.SetImpersonatedUser(r.Context(), u)
			c.SetRequest(r.WithContext(frontproxy.WithUser(r.Context(), u)))
		}
		return next(c)
	}
}

// kube's audit annotations of the authorization decision.
const (
	decisionAnnotation = "authorization.k8s.io/decision"
	reasonAnnotation   = "authorization.k8s.io/reason"
)

// audit records the request by the audit policy; without one it does
// nothing.
func (s *Server) audit(next echo.HandlerFunc) echo.HandlerFunc {
	if s.auditor == nil {
		return next
	}
	return s.auditor.Filter(next)
}

// authorize lets the request on only when its user may make it: kube's
// 403 when not, 503 when authz cannot say.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		u, _ := frontproxy.UserFrom(r.Context())
		attrs := authz.AttributesOf(u, requestInfo(c))
		d, err := s.authz.Authorize(r.Context(), attrs)
		if err != nil {
			audit.AddAnnotations(r.Context(), reasonAnnotation, "internal error")
			return apistatus.Write(c, err)
		}
		if !d.Allowed {
			audit.AddAnnotations(r.Context(), decisionAnnotation, "forbid", reasonAnnotation, d.Reason)
			return apistatus.Write(c, authz.Forbidden(attrs, d.Reason))
		}
		audit.AddAnnotations(r.Context(), decisionAnnotation, "allow", reasonAnnotation, d.Reason)
		return next(c)
	}
}
