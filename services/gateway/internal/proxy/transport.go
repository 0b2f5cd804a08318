package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/serving"
	"kplane.dev/libs/tracing"
)

// Transport is an http.RoundTripper to the replicas of one backend. It
// sends each request to a replica's address, whatever the request's own
// URL names, so callers may build URLs on any of the replicas (or on
// URL()).
//
// A replica URL may name a host that resolves to several addresses: a
// compose service scaled up, or a headless Kubernetes Service. Each
// address is a replica of its own with connections of its own, so load
// spreads over all of them instead of riding the one connection HTTP/2
// would keep to whichever address was dialed first. Names are resolved
// again every resolveEvery, and at once after a replica could not be
// reached, so replicas that come and go are followed; until a resolution
// succeeds the last addresses stay in use.
type Transport struct {
	targets []target
	lookup  func(ctx context.Context, host string) ([]string, error)
	every   time.Duration

	endpoints atomic.Pointer[[]endpoint]
	// resolvedAt is when endpoints were last resolved (unix nanoseconds);
	// zero asks for a resolution on the next request.
	resolvedAt atomic.Int64
	resolving  atomic.Bool
	// first makes the first requests wait for the first resolution.
	first sync.Mutex
	next  atomic.Uint64
	// traced is the request's way through a client span; nil without
	// tracing.
	traced http.RoundTripper
}

// target is one replica URL and the connections to what its host
// resolves to: certificates are checked against the name, not the
// addresses.
//
// A watch goes over HTTP/2 (streams), everything else over HTTP/1.1
// (unary). A watch lives long and carries little, and its connection's
// pings find a replica that went silent. A short request costs less over
// connections of its own. On one HTTP/2 connection every request of
// every client meets the same frame-reading and frame-writing goroutines
// on both sides, a handoff and a wakeup each way. Over HTTP/1.1 the
// replica reads a request and writes its answer on the connection's own
// goroutine. BenchmarkForward, both ends of the hop at 16 requests at
// once: a proxied create costs 54 to 60 µs over HTTP/1.1 against 72 to
// 83 µs over HTTP/2. Silent replicas on those connections are found by
// the kernel instead (see dialer).
//
// Unary requests whose every byte is known before sending go out on the
// handler's own goroutine (direct, see unaryClient); the rest through
// net/http's Transport (unary).
type target struct {
	url            *url.URL
	streams, unary *http.Transport
	direct         *unaryClient
}

// endpoint is one address a target resolved to.
type endpoint struct {
	target int
	host   string
}

var _ http.RoundTripper = (*Transport)(nil)

// resolveEvery is how often replica names are resolved again: about how
// long a new replica waits for its first request.
const resolveEvery = 5 * time.Second

// Option changes a Transport's defaults.
type Option func(*Transport)

// WithResolver resolves replica names with lookup every interval instead
// of with the system resolver every resolveEvery.
func WithResolver(lookup func(ctx context.Context, host string) ([]string, error), every time.Duration) Option {
	return func(t *Transport) { t.lookup, t.every = lookup, every }
}

// WithTracing sends the requests of a request the gateway traces under a
// client span named after the backend, with the trace context in their
// headers, so that the backend's spans join the trace. The gateway's own
// background requests (discovery, routes) start no traces.
func WithTracing(tp *tracing.Provider, backend string) Option {
	return func(t *Transport) {
		if !tp.Enabled() {
			return
		}
		t.traced = tp.Transport(roundTripper(t.roundTrip),
			otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "proxy " + backend }),
			otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanContextFromContext(r.Context()).IsValid() }))
	}
}

// roundTripper is a function as an http.RoundTripper.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// NewTransport returns a Transport to replicas (https URLs; their paths
// are ignored) with tlsConfig, which carries the client certificate and
// the CA of the replicas' serving certificates.
func NewTransport(replicas []*url.URL, tlsConfig *tls.Config, opts ...Option) (*Transport, error) {
	if len(replicas) == 0 {
		return nil, errors.New("transport: no replica URL")
	}
	t := &Transport{lookup: net.DefaultResolver.LookupHost, every: resolveEvery}
	for _, o := range opts {
		o(t)
	}
	for _, u := range replicas {
		if u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("transport: replica %q is not an https URL", u)
		}
		cfg := tlsConfig.Clone()
		cfg.ServerName = u.Hostname()
		unaryCfg := cfg.Clone()
		unaryCfg.NextProtos = []string{"http/1.1"}
		t.targets = append(t.targets, target{
			url: u,
			streams: &http.Transport{
				DialContext:           dialer().DialContext,
				TLSClientConfig:       cfg,
				TLSHandshakeTimeout:   10 * time.Second,
				ForceAttemptHTTP2:     true,
				MaxIdleConnsPerHost:   100,
				IdleConnTimeout:       backendIdleTimeout,
				ExpectContinueTimeout: time.Second,
				// A replica cut off the network leaves its connection
				// open and silent; pings find it, so the watches on it
				// end and are opened again elsewhere instead of hanging
				// until TCP gives up minutes later.
				HTTP2: &http.HTTP2Config{SendPingTimeout: 10 * time.Second, PingTimeout: 5 * time.Second},
			},
			unary: &http.Transport{
				DialContext:         dialer().DialContext,
				TLSClientConfig:     unaryCfg,
				TLSHandshakeTimeout: 10 * time.Second,
				// A non-nil empty map keeps the transport on HTTP/1.1.
				TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
				// Every connection a burst opened stays for the next
				// one: a new connection is a TLS handshake.
				MaxIdleConnsPerHost:   maxIdleUnary,
				IdleConnTimeout:       backendIdleTimeout,
				ExpectContinueTimeout: time.Second,
			},
			direct: newUnaryClient(unaryCfg),
		})
	}
	return t, nil
}

// URL is the first replica's URL, a base for requests through t.
func (t *Transport) URL() *url.URL {
	u := *t.targets[0].url
	return &u
}

// current returns the endpoints, resolving them first when there are
// none yet and in the background when they are due.
func (t *Transport) current(ctx context.Context) ([]endpoint, error) {
	if eps := t.endpoints.Load(); eps != nil {
		if time.Since(time.Unix(0, t.resolvedAt.Load())) >= t.every && t.resolving.CompareAndSwap(false, true) {
			go func() {
				defer t.resolving.Store(false)
				ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
				defer cancel()
				_ = t.resolve(ctx)
			}()
		}
		return *eps, nil
	}
	t.first.Lock()
	defer t.first.Unlock()
	if eps := t.endpoints.Load(); eps != nil {
		return *eps, nil
	}
	if err := t.resolve(ctx); err != nil {
		return nil, err
	}
	return *t.endpoints.Load(), nil
}

// resolveTimeout bounds a background resolution.
const resolveTimeout = 10 * time.Second

// resolve looks every target's host up again. A target whose lookup
// fails keeps the addresses it had.
func (t *Transport) resolve(ctx context.Context) error {
	var old []endpoint
	if p := t.endpoints.Load(); p != nil {
		old = *p
	}
	var eps []endpoint
	var errs []error
	for i, tg := range t.targets {
		host, port := tg.url.Hostname(), tg.url.Port()
		if port == "" {
			port = "443"
		}
		if net.ParseIP(host) != nil {
			eps = append(eps, endpoint{target: i, host: tg.url.Host})
			continue
		}
		addrs, err := t.lookup(ctx, host)
		if err != nil || len(addrs) == 0 {
			if err == nil {
				err = errors.New("no address")
			}
			errs = append(errs, fmt.Errorf("resolve %s: %w", host, err))
			for _, e := range old {
				if e.target == i {
					eps = append(eps, e)
				}
			}
			continue
		}
		slices.Sort(addrs)
		for _, a := range addrs {
			eps = append(eps, endpoint{target: i, host: net.JoinHostPort(a, port)})
		}
	}
	if len(eps) == 0 {
		return fmt.Errorf("transport: no replica address: %w", errors.Join(errs...))
	}
	t.endpoints.Store(&eps)
	t.resolvedAt.Store(time.Now().UnixNano())
	return nil
}

// RoundTrip sends r to the replicas in turn, starting with the next one
// round robin. A request that may be sent twice (GET or HEAD without a
// body) moves on to the next replica when a replica fails before
// answering; any other request moves on only when no connection to the
// replica could be made, since then it was never sent. Once a response
// has begun, nothing is retried, so a watch that has started streaming
// is never replayed. A replica that cannot be reached makes the names be
// resolved again.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.traced != nil {
		return t.traced.RoundTrip(r)
	}
	return t.roundTrip(r)
}

func (t *Transport) roundTrip(r *http.Request) (*http.Response, error) {
	eps, err := t.current(r.Context())
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	start := int(t.next.Add(1) - 1)
	idempotent, stream, direct := retriable(r), streaming(r), sendable(r)
	// A small body of declared length is read whole first (see
	// holdBody); a larger one, or one of unknown length, streams to the
	// replica, never held in memory: a request whose connection could not
	// be made has not read a byte of it, so it goes to the next replica
	// as it is.
	var body *unsentBody
	var held []byte
	switch {
	case r.Body == nil || r.Body == http.NoBody:
	case 0 < r.ContentLength && r.ContentLength <= maxHeldBody:
		if held, err = holdBody(r); err != nil {
			return nil, err
		}
	default:
		body = &unsentBody{body: r.Body}
	}
	var errs []error
	for i := range eps {
		e := eps[(start+i)%len(eps)]
		tg := t.targets[e.target]
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = tg.url.Scheme, e.host
		out.Host = tg.url.Host
		var resp *http.Response
		switch {
		case body == nil && !stream && direct:
			resp, err = tg.direct.roundTrip(out, e.host, held)
		case held != nil:
			out.Body = io.NopCloser(bytes.NewReader(held))
			resp, err = tg.unary.RoundTrip(out)
		case body != nil:
			out.Body = body
			resp, err = tg.unary.RoundTrip(out)
		case stream:
			resp, err = tg.streams.RoundTrip(out)
		default:
			resp, err = tg.unary.RoundTrip(out)
		}
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", e.host, err))
		if notSent(err) {
			t.resolvedAt.Store(0)
		}
		if r.Context().Err() != nil || !(idempotent || notSent(err) && !body.started()) {
			break
		}
	}
	if body != nil && !body.started() {
		// A RoundTrip closes the body it was given, which no attempt
		// did.
		if err := body.body.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close request body: %w", err))
		}
	}
	return nil, errors.Join(errs...)
}

// maxHeldBody bounds the request bodies holdBody reads whole: every
// write kubectl and client-go send, not the largest bodies kube accepts.
const maxHeldBody = 64 << 10

// holdBody reads r's body, of r.ContentLength bytes, and closes it.
// net/http writes a body it must stream after flushing the headers on
// their own (the ReverseProxy's wrapper hides even a body in memory), so
// that every create, update and patch took two TLS records and two
// writes here and two reads on the replica; a body it knows to be in
// memory goes out with its headers in one. An error reading it is the
// client's, a 400, unless it carries a Status already.
func holdBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	b := make([]byte, r.ContentLength)
	if _, err := io.ReadFull(r.Body, b); err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		return nil, apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	return b, nil
}

// unsentBody is a request body that may be offered to several replicas
// until one reads it: closing it before any read leaves it for the next
// attempt.
type unsentBody struct {
	body io.ReadCloser
	// read is set by the first read; from then on the body belongs to
	// that attempt.
	read atomic.Bool
}

func (b *unsentBody) Read(p []byte) (int, error) {
	b.read.Store(true)
	return b.body.Read(p)
}

func (b *unsentBody) Close() error {
	if !b.read.Load() {
		return nil
	}
	return b.body.Close()
}

// started reports whether an attempt has begun reading b; a nil b never
// does.
func (b *unsentBody) started() bool { return b != nil && b.read.Load() }

// notSent reports whether err means the request never left: the
// connection to the replica could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// CloseIdleConnections closes the idle connections to every replica.
func (t *Transport) CloseIdleConnections() {
	for _, tg := range t.targets {
		tg.streams.CloseIdleConnections()
		tg.unary.CloseIdleConnections()
		tg.direct.closeIdle()
	}
}

// streaming reports whether r is a watch: a GET with a watch parameter
// other than "false" or "0" (in any case), as kube's parameter codec reads
// it, or a GET with /watch/ in its path, as the legacy watch paths have
// (so has a namespace named watch; only the protocol depends on it).
// Anything else a backend streams (a large list, an aggregated server's
// logs) streams over HTTP/1.1 as well.
func streaming(r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	if values, ok := r.URL.Query()["watch"]; ok {
		w := ""
		if len(values) > 0 {
			w = strings.ToLower(values[0])
		}
		return w != "false" && w != "0"
	}
	return strings.Contains(r.URL.Path, "/watch/")
}

// maxIdleUnary bounds the idle HTTP/1.1 connections kept to one replica
// address.
const maxIdleUnary = 256

// backendIdleTimeout is how long a connection to a backend stays idle
// before the gateway closes it: well before the backend does
// (serving.IdleTimeout). At the same 90 s a request could go out on a
// connection the backend was closing; a write sent so is not sent again,
// and the client got 503 "error trying to reach service: EOF" (once in
// a kplane-load run, on a patch after the connection sat idle while the
// reference server had its turn).
const backendIdleTimeout = serving.IdleTimeout * 2 / 3

func retriable(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.Body == nil || r.Body == http.NoBody
}
