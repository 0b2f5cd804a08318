package filters

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// Timeout gives a request that is not long-running a deadline: the
// configured request timeout, or its ?timeout= when shorter and positive,
// as kube's request deadline does. When the deadline passes before the
// handler answered, the client gets kube's 504 Timeout Status at once;
// when the handler had begun answering, the response is aborted, since it
// can no longer be a whole one. Either way the handler is waited for.
//
// Reading the request's body fails at the same deadline, and an answer
// given before the body is read (a refusal, a GET whose body is ignored)
// goes out at once: HTTP/1.1 would otherwise consume the body first.
func (f *Filters) Timeout() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body != nil && r.Body != http.NoBody {
				if err := http.NewResponseController(c.Response().Writer).EnableFullDuplex(); err != nil && !errors.Is(err, http.ErrNotSupported) {
					f.log.Debug("answer before the request body", "err", err)
				}
				closeUnlessRead(c)
			}
			if LongRunning(f.info(c)) {
				return next(c)
			}
			timeout := f.cfg.RequestTimeout
			if v := r.URL.Query().Get("timeout"); v != "" {
				d, err := time.ParseDuration(v)
				if err != nil {
					return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("invalid timeout specified in the request URL - %v", err)))
				}
				if d > 0 && d < timeout {
					timeout = d
				}
			}
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			c.SetRequest(r.WithContext(ctx))
			// A body that trickles in must not hold the request, and the
			// max-in-flight slot it holds, past its deadline: reading it
			// fails then. What the server discards of a body nobody read
			// is bounded by the same deadline.
			deadline, _ := ctx.Deadline()
			if err := http.NewResponseController(c.Response().Writer).SetReadDeadline(deadline); err != nil && !errors.Is(err, http.ErrNotSupported) {
				f.log.Debug("set request read deadline", "err", err)
			}
			return f.serveWithin(ctx, c, next)
		}
	}
}

// handlerResult is how a handler run in its own goroutine ended.
type handlerResult struct {
	err       error
	panicking bool
	panicVal  any
}

// serveWithin runs next in a goroutine it waits for, answering 504 when
// ctx ends first.
func (f *Filters) serveWithin(ctx context.Context, c echo.Context, next echo.HandlerFunc) error {
	resp := c.Response()
	w := resp.Writer
	tw := &timeoutWriter{w: w, header: w.Header().Clone()}
	resp.Writer = tw
	done := make(chan handlerResult, 1)
	go func() {
		res := handlerResult{panicking: true}
		defer func() {
			if res.panicking {
				res.panicVal = recover()
			}
			tw.finish()
			done <- res
		}()
		res.err = next(c)
		res.panicking = false
	}()

	var res handlerResult
	received := false
	select {
	case res = <-done:
		received = true
	case <-ctx.Done():
	}
	started, finished := tw.timeout()
	// A handler that failed as the deadline passed failed for it: its
	// body's read deadline is the same instant and may fire first.
	if received && (started || res.panicking || timeoutCause(ctx) == nil) {
		resp.Writer = w
		return finish(res)
	}
	// A handler that answered nothing by the deadline gets the 504, even
	// if it returned as the deadline passed: its error is the deadline's.
	if !started {
		if err := apistatus.WriteHTTP(w, apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %v", timeoutCause(ctx)), 0)); err != nil {
			f.log.Debug("write timeout status", "err", err)
		}
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
	if !received {
		res = <-done
	}
	resp.Writer = w
	if started && finished {
		// The handler answered and returned as the deadline passed.
		return finish(res)
	}
	if res.panicking && res.panicVal != http.ErrAbortHandler {
		panic(res.panicVal)
	}
	if res.err != nil {
		f.log.Debug("request ended after its timeout", "path", c.Request().URL.Path, "err", res.err)
	}
	if started {
		// Abort without a stack trace in the log: the client sees a
		// cut response rather than a whole wrong one.
		panic(http.ErrAbortHandler)
	}
	resp.Status, resp.Committed = http.StatusGatewayTimeout, true
	return nil
}

// timeoutCause is why ctx ended: its deadline once that has passed, even
// when the server cancelled the request first, as an HTTP/1 connection
// does when the read deadline, which is the same instant, fires.
func timeoutCause(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return ctx.Err()
}

func finish(res handlerResult) error {
	if res.panicking {
		panic(res.panicVal)
	}
	return res.err
}

// timeoutWriter passes a handler's response through until the timeout;
// after it, writes fail with http.ErrHandlerTimeout. The handler's headers
// live in a map of their own until it writes, so the 504 is not built on
// them.
type timeoutWriter struct {
	w           http.ResponseWriter
	mu          sync.Mutex
	header      http.Header
	timedOut    bool
	wroteHeader bool
	// finished is set when the handler returns.
	finished bool
}

func (tw *timeoutWriter) Header() http.Header {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return http.Header{}
	}
	return tw.header
}

func (tw *timeoutWriter) WriteHeader(code int) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut || tw.wroteHeader {
		return
	}
	tw.writeHeaderLocked(code)
}

func (tw *timeoutWriter) writeHeaderLocked(code int) {
	dst := tw.w.Header()
	for k, v := range tw.header {
		dst[k] = v
	}
	tw.wroteHeader = true
	tw.w.WriteHeader(code)
}

func (tw *timeoutWriter) Write(p []byte) (int, error) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return 0, http.ErrHandlerTimeout
	}
	if !tw.wroteHeader {
		tw.writeHeaderLocked(http.StatusOK)
	}
	return tw.w.Write(p)
}

// Flush lets a proxied response stream until the timeout.
func (tw *timeoutWriter) Flush() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if tw.timedOut {
		return
	}
	if !tw.wroteHeader {
		tw.writeHeaderLocked(http.StatusOK)
	}
	if fl, ok := tw.w.(http.Flusher); ok {
		fl.Flush()
	}
}

// timeout ends the handler's use of the response and reports whether it
// had begun answering and whether it had returned: together, under one
// lock, so that a handler returning as the deadline passes is either
// whole or aborted, never both.
func (tw *timeoutWriter) timeout() (started, finished bool) {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.timedOut = true
	return tw.wroteHeader, tw.finished
}

func (tw *timeoutWriter) finish() {
	tw.mu.Lock()
	defer tw.mu.Unlock()
	tw.finished = true
}

// closeUnlessRead makes an HTTP/1.x answer given before the request's
// body was read to its end say "Connection: close". The server closes such
// a connection after the answer anyway (it will not read a body of unknown
// length to find the next request), and a client that was not told sends
// its next request on it and gets EOF — which client-go does not retry for
// writes.
func closeUnlessRead(c echo.Context) {
	r := c.Request()
	if r.ProtoMajor != 1 {
		return
	}
	body := &eofTracker{ReadCloser: r.Body}
	r.Body = body
	c.Response().Writer = &closeUnlessReadWriter{ResponseWriter: c.Response().Writer, body: body}
}

// eofTracker notes that its body was read to the end.
type eofTracker struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *eofTracker) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

// closeUnlessReadWriter asks for the connection to close when it answers
// before its request's body ended. The timeout filter orders its writers,
// so wrote is not written concurrently.
type closeUnlessReadWriter struct {
	http.ResponseWriter
	body  *eofTracker
	wrote bool
}

func (w *closeUnlessReadWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnlessReadWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *closeUnlessReadWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *closeUnlessReadWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
