package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
)

// Forward sends r to the backend behind rt as user u and streams the
// answer to w. A backend that cannot be reached is a 503 Status, as
// kube-aggregator answers; one that fails mid-answer aborts it, so that
// the client does not take a truncated body for a whole one.
func Forward(w http.ResponseWriter, r *http.Request, rt http.RoundTripper, u *frontproxy.User, log *slog.Logger) {
	forward(w, r, rt, u, log, 0, nil)
}

// ForwardWatch is Forward for a watch: when the backend fails after its
// answer began (the replica died), the client's stream ends as a finished
// response, as a watch the server closes does, instead of being aborted.
// client-go then opens the watch again from the last resourceVersion it
// saw; an aborted stream would reach it as an error event first. A watch
// is a sequence of events, so a clean end loses nothing: an event cut in
// the middle is one the client never decodes and gets again.
func ForwardWatch(w http.ResponseWriter, r *http.Request, rt http.RoundTripper, u *frontproxy.User, log *slog.Logger) {
	forward(w, r, rt, u, log, -1, func(resp *http.Response) error {
		resp.Body = &endingBody{ReadCloser: resp.Body, r: r, log: log}
		return nil
	})
}

// endingBody ends a backend's answer at its first read error, which it
// logs, while the client of r is there; a client that went away needs no
// ending, and its watch is not the backend's failure.
type endingBody struct {
	io.ReadCloser
	r   *http.Request
	log *slog.Logger
}

func (b *endingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.r.Context().Err() == nil {
		b.log.Info("backend failed mid-watch, ending the watch", "path", b.r.URL.Path, "err", err)
		err = io.EOF
	}
	return n, err
}

// forward proxies r. flush is the ReverseProxy's FlushInterval: -1
// sends every write on at once, as a watch's events must go; 0 lets an
// answer of known length go out whole when it is done, saving a frame and
// a write to the client per request. An answer of unknown length (a
// large list, a stream of an aggregated server) is flushed as it comes
// either way.
func forward(w http.ResponseWriter, r *http.Request, rt http.RoundTripper, u *frontproxy.User, log *slog.Logger, flush time.Duration, modify func(*http.Response) error) {
	rp := &httputil.ReverseProxy{
		ModifyResponse: modify,
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The Transport picks the replica; the URL only has to be
			// well formed.
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", "backend"
			pr.Out.Host = ""
			frontproxy.SetHeaders(pr.Out.Header, u)
		},
		Transport:     rt,
		FlushInterval: flush,
		BufferPool:    copyBuffers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client is gone; nobody reads an answer.
				return
			}
			// The request's own body may fail it: a body over the
			// gateway's limit carries kube's 413.
			var st apierrors.APIStatus
			if errors.As(err, &st) {
				if werr := apistatus.WriteHTTP(w, err); werr != nil {
					log.Debug("write request error", "err", werr)
				}
				return
			}
			log.Warn("backend unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err))); werr != nil {
				log.Debug("write backend error", "err", werr)
			}
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}

// copyBuffers lends ReverseProxy the buffers it copies answers through.
// Without them it allocates 32 KiB per request: under a load of gets that
// was 63% of what the gateway allocated, and its garbage collection 10%
// of the gateway's CPU.
var copyBuffers = &bufferPool{pool: sync.Pool{New: func() any { return new([copyBufferSize]byte) }}}

// copyBufferSize is ReverseProxy's own buffer size.
const copyBufferSize = 32 << 10

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte { return p.pool.Get().(*[copyBufferSize]byte)[:] }

func (p *bufferPool) Put(b []byte) {
	if cap(b) == copyBufferSize {
		p.pool.Put((*[copyBufferSize]byte)(b[:copyBufferSize]))
	}
}
