package frontproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	restclient "k8s.io/client-go/rest"
)

// LoopbackHost is the host of requests made through Loopback; nothing
// listens there.
const LoopbackHost = "http://loopback.kplane.invalid"

// Loopback returns a RoundTripper that serves each request by calling h in
// process, with u as the request's user and any identity headers removed.
// Responses stream: a watch's events reach the client as h flushes them,
// and closing the body ends h's request context and waits for h to return.
func Loopback(h http.Handler, u User) http.RoundTripper {
	return &loopback{h: h, user: u}
}

// LoopbackConfig is a client-go config whose requests reach h through
// Loopback as u, with no rate limit: the caller is the service itself.
func LoopbackConfig(h http.Handler, u User) *restclient.Config {
	return &restclient.Config{Host: LoopbackHost, Transport: Loopback(h, u), QPS: -1}
}

type loopback struct {
	h    http.Handler
	user User
}

func (l *loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	u := l.user
	ctx, cancel := context.WithCancel(WithUser(req.Context(), &u))
	r := req.Clone(ctx)
	r.RequestURI = req.URL.RequestURI()
	r.RemoteAddr = "loopback"
	if r.Host == "" {
		r.Host = req.URL.Host
	}
	if r.Body == nil {
		r.Body = http.NoBody
	}
	StripClientIdentity(r.Header)

	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, started: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = r.Body.Close() }()
		err := serve(l.h, w, r)
		if err == nil {
			w.start(http.StatusOK, nil)
		}
		_ = pw.CloseWithError(err)
	}()
	select {
	case <-w.started:
	case <-done:
	}
	body := &responseBody{r: pr, stop: func() {
		cancel()
		_ = pr.Close()
		<-done
	}}
	if w.code == 0 {
		// The handler failed before it said anything.
		_, err := io.ReadAll(pr)
		body.Close()
		return nil, fmt.Errorf("loopback %s %s: %w", req.Method, req.URL.Path, err)
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}
	if n, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = n
	}
	return resp, nil
}

// errPanic reports a handler that panicked; the response ends with it.
var errPanic = errors.New("handler panicked")

// serve calls h, turning a panic into an error as net/http would end the
// connection instead of the process.
func serve(h http.Handler, w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	h.ServeHTTP(w, r)
	return nil
}

// pipeWriter is the ResponseWriter of a loopback request: the status and
// header go to RoundTrip when first written, the body into a pipe the
// client reads.
type pipeWriter struct {
	header http.Header
	body   *io.PipeWriter

	once    sync.Once
	started chan struct{}
	// code and sent are set once, before started closes.
	code int
	sent http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		return
	}
	w.start(code, nil)
}

// start sends the status and header once; a body written without a
// Content-Type gets the one net/http would sniff.
func (w *pipeWriter) start(code int, firstWrite []byte) {
	w.once.Do(func() {
		if firstWrite != nil && w.header.Get("Content-Type") == "" {
			w.header.Set("Content-Type", http.DetectContentType(firstWrite))
		}
		w.code, w.sent = code, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.start(http.StatusOK, p)
	return w.body.Write(p)
}

// Flush sends the header; the body needs no flushing, the pipe hands each
// write to the reader.
func (w *pipeWriter) Flush() { w.start(http.StatusOK, nil) }

type responseBody struct {
	r    *io.PipeReader
	once sync.Once
	stop func()
}

func (b *responseBody) Read(p []byte) (int, error) { return b.r.Read(p) }

// Close ends the request and waits for its handler to return.
func (b *responseBody) Close() error {
	b.once.Do(b.stop)
	return nil
}
