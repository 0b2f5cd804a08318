package proxy

import (
	"bytes"
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
	body, err := replayableBody(r, idempotent)
	if err != nil {
		return nil, err
	}
	var errs []error
	for i := range t.replicas {
		u := t.replicas[(start+i)%len(t.replicas)]
		out := r.Clone(r.Context())
		out.URL.Scheme, out.URL.Host = u.Scheme, u.Host
		out.Host = ""
		if body != nil {
			out.Body = io.NopCloser(bytes.NewReader(body))
			out.ContentLength = int64(len(body))
		}
		resp, err := t.base.RoundTrip(out)
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", u.Host, err))
		if r.Context().Err() != nil || !(idempotent || notSent(err)) {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// replayableBody reads the body of a request that may have to be sent to
// a second replica. The gateway's body limit has bounded it already.
func replayableBody(r *http.Request, idempotent bool) ([]byte, error) {
	if idempotent || r.Body == nil || r.Body == http.NoBody || len(r.Header.Values("Upgrade")) > 0 {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, r.Body.Close()
}

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
