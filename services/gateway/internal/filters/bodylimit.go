package filters

import (
	"bytes"
	"fmt"
	"io"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/requestinfo"
)

// BodyLimit answers 413 to a write whose body is larger than the limit,
// before it is proxied, with kube's Status. A body of unknown length
// (chunked) is read into memory up to the limit to learn its size;
// streaming requests are not limited.
func (f *Filters) BodyLimit() echo.MiddlewareFunc {
	limit := f.cfg.MaxRequestBodyBytes
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if limit == 0 {
			return next
		}
		return func(c echo.Context) error {
			r := c.Request()
			if !limitsBody(f.info(c)) || r.Body == nil {
				return next(c)
			}
			tooLarge := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
			if r.ContentLength > limit {
				return apistatus.Write(c, tooLarge)
			}
			if r.ContentLength < 0 {
				body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
				if err != nil {
					return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err)))
				}
				if int64(len(body)) > limit {
					return apistatus.Write(c, tooLarge)
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				r.ContentLength = int64(len(body))
			}
			return next(c)
		}
	}
}

// limitsBody reports whether a request's body is a write that kube reads
// whole, and so limits.
func limitsBody(info *requestinfo.Info) bool {
	if !info.IsResourceRequest || LongRunning(info) {
		return false
	}
	switch info.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}
