package proxy_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// connCounter counts the connections a test replica accepted.
type connCounter struct{ n atomic.Int64 }

func (c *connCounter) track(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		c.n.Add(1)
	}
}

func (c *connCounter) count() int64 { return c.n.Load() }

// countedReplica starts a TLS replica serving h over HTTP/1.1 and counts
// its connections.
func countedReplica(t *testing.T, h http.HandlerFunc) (*httptest.Server, *connCounter) {
	t.Helper()
	conns := &connCounter{}
	s := httptest.NewUnstartedServer(h)
	s.Config.ConnState = conns.track
	s.StartTLS()
	t.Cleanup(s.Close)
	return s, conns
}

// send sends a request through tr and reads its answer whole.
func send(t *testing.T, tr http.RoundTripper, ctx context.Context, method, url, body string) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, url, err)
	}
	return resp, string(b)
}

// Unary requests share connections: one whose answer was read whole
// carries the next request, whatever the answer's framing; one whose
// answer was left unread, or that the replica asked to close, does not.
func TestUnaryConnectionsAreReused(t *testing.T) {
	s, conns := countedReplica(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/chunked":
			// No length: the answer is chunked.
			_, _ = io.WriteString(w, "a")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "b")
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		case "/close":
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		case "/large":
			_, _ = io.WriteString(w, strings.Repeat("x", 1<<20))
		default:
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write(append([]byte(r.Method+" "), b...))
		}
	})
	tr := transportTo(t, s)
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	for i := range 5 {
		if _, got := send(t, tr, ctx, http.MethodGet, s.URL+"/x", ""); got != "GET " {
			t.Fatalf("get %d answered %q", i, got)
		}
		if _, got := send(t, tr, ctx, http.MethodPost, s.URL+"/x", "body"); got != "POST body" {
			t.Fatalf("post %d answered %q", i, got)
		}
		if _, got := send(t, tr, ctx, http.MethodGet, s.URL+"/chunked", ""); got != "ab" {
			t.Fatalf("chunked answer %d read %q", i, got)
		}
		if resp, _ := send(t, tr, ctx, http.MethodDelete, s.URL+"/empty", ""); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("delete %d answered %d", i, resp.StatusCode)
		}
		if resp, _ := send(t, tr, ctx, http.MethodHead, s.URL+"/x", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("head %d answered %d", i, resp.StatusCode)
		}
	}
	if n := conns.count(); n != 1 {
		t.Errorf("25 requests in turn took %d connections, want 1", n)
	}

	if _, got := send(t, tr, ctx, http.MethodGet, s.URL+"/close", ""); got != "bye" {
		t.Fatalf("closing answer read %q", got)
	}
	send(t, tr, ctx, http.MethodGet, s.URL+"/x", "")
	if n := conns.count(); n != 2 {
		t.Errorf("after an answer that closed its connection: %d connections, want 2", n)
	}

	req, err := http.NewRequest(http.MethodGet, s.URL+"/large", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := resp.Body.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if _, got := send(t, tr, ctx, http.MethodGet, s.URL+"/x", ""); got != "GET " {
		t.Fatalf("get after an answer left unread answered %q", got)
	}
	if n := conns.count(); n != 3 {
		t.Errorf("after an answer left unread: %d connections, want 3", n)
	}
}

// A request given up on while the replica works on it ends at once with
// the context's error, and its connection, where the answer may still
// arrive, carries no other request.
func TestUnaryRequestGivenUp(t *testing.T) {
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	s, conns := countedReplica(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, "done")
	})
	defer close(release)
	tr := transportTo(t, s)
	defer tr.CloseIdleConnections()
	send(t, tr, context.Background(), http.MethodGet, s.URL+"/x", "")

	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/slow", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		resp, err := tr.RoundTrip(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		errc <- err
	}()
	// The request is on the replica's connection before it is given up.
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach the replica")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("request given up on ended with %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("request given up on still waits for its answer")
	}
	if _, got := send(t, tr, context.Background(), http.MethodGet, s.URL+"/x", ""); got != "done" {
		t.Fatalf("next request answered %q", got)
	}
	if n := conns.count(); n != 2 {
		t.Errorf("%d connections, want 2: the given-up request's connection must not be used again", n)
	}
}

// A connection the replica closed while it sat idle (a replica
// restarting, its idle timeout) fails no request: a write is not written
// into it, and a get that met the close on its way is sent again.
func TestUnaryConnectionsClosedByTheReplica(t *testing.T) {
	s, conns := countedReplica(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, _ = w.Write(b)
	})
	tr := transportTo(t, s)
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	send(t, tr, ctx, http.MethodPost, s.URL+"/x", "first")
	for i := range 3 {
		s.CloseClientConnections()
		if _, got := send(t, tr, ctx, http.MethodPost, s.URL+"/x", "again"); got != "again" {
			t.Fatalf("post %d after the replica closed the connection answered %q", i, got)
		}
	}
	if n := conns.count(); n != 4 {
		t.Errorf("%d connections, want 4", n)
	}
}

// An informational answer (103 Early Hints) before the answer is passed
// over.
func TestUnaryInformationalAnswers(t *testing.T) {
	s, _ := countedReplica(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</x>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "ok")
	})
	tr := transportTo(t, s)
	defer tr.CloseIdleConnections()
	resp, got := send(t, tr, context.Background(), http.MethodGet, s.URL+"/x", "")
	if resp.StatusCode != http.StatusOK || got != "ok" {
		t.Fatalf("answered %d %q, want 200 ok", resp.StatusCode, got)
	}
}

// servedKey holds the count of requests a replica's connection has
// carried.
type servedKey struct{}

// A connection that fails before any of its answer arrived, after it
// carried requests before, sends a get again on a new connection, as
// net/http's Transport does; a write, which the replica may have done,
// fails.
func TestUnaryGetsSentAgainWhenAUsedConnectionFails(t *testing.T) {
	conns := &connCounter{}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served := r.Context().Value(servedKey{}).(*atomic.Int32).Add(1)
		if r.URL.Path == "/drop" && served > 1 {
			c, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_ = c.Close()
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	s.Config.ConnState = conns.track
	s.Config.ConnContext = func(ctx context.Context, _ net.Conn) context.Context {
		return context.WithValue(ctx, servedKey{}, new(atomic.Int32))
	}
	s.StartTLS()
	defer s.Close()
	tr := transportTo(t, s)
	defer tr.CloseIdleConnections()
	ctx := context.Background()
	send(t, tr, ctx, http.MethodGet, s.URL+"/x", "")
	if _, got := send(t, tr, ctx, http.MethodGet, s.URL+"/drop", ""); got != "ok" {
		t.Fatalf("get answered %q", got)
	}
	if n := conns.count(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
	req, err := http.NewRequest(http.MethodPost, s.URL+"/drop", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := tr.RoundTrip(req); err == nil {
		_ = resp.Body.Close()
		t.Fatal("a write whose connection failed was sent again")
	}
}
