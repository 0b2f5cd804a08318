package proxy

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"
)

// Transport is an http.RoundTripper to the replicas of one backend. It
// sends each request to a replica's scheme and host, whatever the
// request's own URL names, so callers may build URLs on any of the
// replicas (or on URL()).
type Transport struct {
	replicas []*url.URL
	next     atomic.Uint64
	base     *http.Transport
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport to replicas (https URLs; their paths
// are ignored) with tlsConfig, which carries the client certificate and
// the CA of the replicas' serving certificates.
func NewTransport(replicas []*url.URL, tlsConfig *tls.Config) (*Transport, error) {
	if len(replicas) == 0 {
		return nil, errors.New("transport: no replica URL")
	}
	for _, u := range replicas {
		if u.Scheme != "https" || u.Host == "" {
			return nil, fmt.Errorf("transport: replica %q is not an https URL", u)
		}
	}
	base := &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		TLSClientConfig:       tlsConfig.Clone(),
		TLSHandshakeTimeout:   10 * time.Second,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   100,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &Transport{replicas: slices.Clone(replicas), base: base}, nil
}

// URL is the first replica's URL, a base for requests through t.
func (t *Transport) URL() *url.URL {
	u := *t.replicas[0]
	return &u
}

// Replicas are the URLs t sends to.
func (t *Transport) Replicas() []*url.URL { return slices.Clone(t.replicas) }

// RoundTrip sends r to the replicas in turn, starting with the next one
// round robin. A request that may be sent twice (GET or HEAD without a
// body) moves on to the next replica when a replica fails before
// answering; any other request moves on only when no connection to the
// replica could be made, since then it was never sent. Once a response
// has begun, nothing is retried, so a watch that has started streaming
// is never replayed.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := int(t.next.Add(1) - 1)
	idempotent := retriable(r)
	// The body streams to the replica, never held in memory: a request
	// whose connection could not be made has not read a byte of it, so
	// it goes to the next replica as it is.
	var body *unsentBody
	if r.Body != nil && r.Body != http.NoBody {
		body = &unsentBody{body: r.Body}
	}
	var errs []error
	for i := range t.replicas {
		u := t.replicas[(start+i)%len(t.replicas)]
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
		out.Host = ""
		if body != nil {
			out.Body = body
		}
		resp, err := t.base.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u.Host, err))
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
func (t *Transport) CloseIdleConnections() { t.base.CloseIdleConnections() }

func retriable(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	return r.Body == nil || r.Body == http.NoBody
}
