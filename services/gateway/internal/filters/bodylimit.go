package filters

import (
	"fmt"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// BodyLimit bounds the body of every request the gateway forwards, as
// kube bounds every body it reads, whatever the method or transfer
// encoding, and streams it rather than holding it:
//
//   - GET and HEAD (watches included) have their body dropped unread, as
//     kube never reads one: the request is answered as if it came without
//     a body, and no byte of it is forwarded.
//   - A declared Content-Length over the limit is kube's 413 at once.
//   - A body of unknown length (chunked) is passed on as it arrives and
//     fails with kube's 413 Status error once it passes the limit; the
//     proxy answers that error as the 413 it is.
//
// Long-running requests (exec, attach, port-forward, proxy) stream for as
// long as the client wants, as in kube, and are not limited.
func (f *Filters) BodyLimit() echo.MiddlewareFunc {
	limit := f.cfg.MaxRequestBodyBytes
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody {
				return next(c)
			}
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				// The server discards at most 256 KiB of what is left
				// once the handler returns, and no longer than the
				// request's read deadline when it has one.
				r.Body, r.ContentLength, r.TransferEncoding = http.NoBody, 0, nil
				return next(c)
			}
			if limit == 0 || LongRunning(f.info(c)) {
				return next(c)
			}
			if r.ContentLength > limit {
				return apistatus.Write(c, tooLarge(limit))
			}
			if r.ContentLength < 0 {
				// A declared length is enforced by the server itself.
				r.Body = &limitedBody{ReadCloser: r.Body, remaining: limit, tooLarge: tooLarge(limit)}
			}
			return next(c)
		}
	}
}

// tooLarge is kube's 413 for a body over limit.
func tooLarge(limit int64) error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
}

// limitedBody passes a body on until more than its limit has been read,
// then fails every read with the 413 error.
type limitedBody struct {
	io.ReadCloser
	// remaining is how many more bytes may be read; below zero once the
	// limit is passed.
	remaining int64
	tooLarge  error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.remaining < 0 {
		return 0, b.tooLarge
	}
	// One byte past the limit tells a body at the limit from a longer one.
	if int64(len(p)) > b.remaining+1 {
		p = p[:b.remaining+1]
	}
	n, err := b.ReadCloser.Read(p)
	b.remaining -= int64(n)
	if b.remaining < 0 {
		// The request fails as a whole; what was read with the extra
		// byte is not passed on.
		return 0, b.tooLarge
	}
	return n, err
}
