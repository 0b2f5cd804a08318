package proxy_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kplane.dev/libs/faultproxy"
	"kplane.dev/services/gateway/internal/proxy"
)

// deadReplica is the URL of a port nothing listens on any more.
func deadReplica(t *testing.T) *url.URL {
	t.Helper()
	return &url.URL{Scheme: "https", Host: faultproxy.UnusedAddr(t)}
}

// A write that could not reach a replica at all was never sent, so it
// goes to the next replica with its body intact; client-go would
// otherwise see a 503 it does not retry.
func TestRequestsNotSentMoveToTheNextReplica(t *testing.T) {
	var got []string
	live := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, r.Method+" "+string(body))
		w.WriteHeader(http.StatusCreated)
	}))
	defer live.Close()
	liveURL, err := url.Parse(live.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := proxy.NewTransport([]*url.URL{deadReplica(t), liveURL}, live.Client().Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodGet} {
		for range 2 { // both round-robin starting points
			var body io.Reader
			if method != http.MethodGet {
				body = strings.NewReader(`{"kind":"ConfigMap"}`)
			}
			req, err := http.NewRequest(method, live.URL+"/api/v1/namespaces/a/configmaps", body)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatalf("%s with one dead replica: %v", method, err)
			}
			_ = resp.Body.Close()
		}
	}
	for _, g := range got {
		if !strings.HasPrefix(g, "GET") && !strings.HasSuffix(g, `{"kind":"ConfigMap"}`) {
			t.Errorf("a retried write lost its body: %q", g)
		}
	}
	if len(got) != 10 {
		t.Fatalf("live replica saw %d requests, want 10", len(got))
	}
}

// replicaAt starts a TLS server answering its own address on ip:port
// (port 0 picks one), with httptest's certificate, which is valid for
// example.com.
func replicaAt(t *testing.T, ip string, port int) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, ip)
	}))
	s.Listener = ln
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// A replica name that resolves to several addresses (a scaled compose
// service, a headless Service) is several replicas: requests spread over
// all of them, over HTTP/1.1 and over HTTP/2 (watches), and replicas that
// come and go are followed.
func TestReplicaNamesAreResolvedAndSpread(t *testing.T) {
	a := replicaAt(t, "127.0.0.2", 0)
	port := a.Listener.Addr().(*net.TCPAddr).Port
	replicaAt(t, "127.0.0.3", port)
	replicaAt(t, "127.0.0.4", port)
	var mu sync.Mutex
	addrs := []string{"127.0.0.2", "127.0.0.3"}
	lookups := 0
	lookup := func(_ context.Context, host string) ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if host != "example.com" {
			return nil, fmt.Errorf("unknown host %q", host)
		}
		lookups++
		return slices.Clone(addrs), nil
	}
	target := &url.URL{Scheme: "https", Host: "example.com:" + strconv.Itoa(port)}
	tlsConfig := a.Client().Transport.(*http.Transport).TLSClientConfig
	tr, err := proxy.NewTransport([]*url.URL{target}, tlsConfig, proxy.WithResolver(lookup, 50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	served := func(n int) map[string]int {
		got := map[string]int{}
		for i := range n {
			// Every other request is a watch, which goes over HTTP/2.
			path, proto := "/api/v1/configmaps", 1
			if i%2 == 1 {
				path, proto = "/api/v1/configmaps?watch=1", 2
			}
			req, err := http.NewRequest(http.MethodGet, target.String()+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.ProtoMajor != proto {
				t.Fatalf("%s answered %s over %s, want HTTP/%d", b, path, resp.Proto, proto)
			}
			got[string(b)]++
		}
		return got
	}
	if got := served(10); got["127.0.0.2"] != 5 || got["127.0.0.3"] != 5 {
		t.Fatalf("two replicas served %v, want 5 each", got)
	}

	// A replica leaves and another comes: once the name is resolved
	// again, the new set serves.
	mu.Lock()
	addrs = []string{"127.0.0.3", "127.0.0.4"}
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := served(4)
		if got["127.0.0.2"] == 0 && got["127.0.0.4"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the replicas changed, served %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// The resolver failing keeps the last addresses.
	mu.Lock()
	addrs = nil
	mu.Unlock()
	time.Sleep(100 * time.Millisecond)
	if got := served(4); got["127.0.0.3"] != 2 || got["127.0.0.4"] != 2 {
		t.Fatalf("with the resolver failing, served %v, want the last two replicas", got)
	}

	// A name that resolves to an address nothing listens on: reads move
	// on to a live replica.
	dead := deadReplica(t)
	deadIP, deadPort, _ := net.SplitHostPort(dead.Host)
	mu.Lock()
	addrs = []string{deadIP, "127.0.0.4"}
	mu.Unlock()
	tr2, err := proxy.NewTransport([]*url.URL{{Scheme: "https", Host: "example.com:" + deadPort}}, tlsConfig, proxy.WithResolver(lookup, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.CloseIdleConnections()
	mu.Lock()
	before := lookups
	mu.Unlock()
	req, err := http.NewRequest(http.MethodGet, "https://example.com/api", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Both addresses share the dead port, so neither answers: the
	// request fails, and the failure asks for the name again although
	// the interval is an hour.
	if _, err := tr2.RoundTrip(req); err == nil {
		t.Fatal("a request with no live replica succeeded")
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, _ = tr2.RoundTrip(req.Clone(req.Context()))
		mu.Lock()
		n := lookups
		mu.Unlock()
		if n > before+1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an unreachable replica did not make the name be resolved again")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Watches go to replicas over HTTP/2, where pings watch the connection;
// every other request over HTTP/1.1, read and answered on its
// connection's own goroutine. A watch is read as kube's parameter codec
// reads ?watch (anything but "false" or "0"), or a legacy /watch/ path.
func TestWatchesOverHTTP2TheRestOverHTTP1(t *testing.T) {
	s := replicaAt(t, "127.0.0.1", 0)
	tr, err := proxy.NewTransport([]*url.URL{mustParse(t, s.URL)}, s.Client().Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.CloseIdleConnections()
	for _, tt := range []struct {
		method, path string
		proto        int
	}{
		{http.MethodGet, "/api/v1/namespaces/a/configmaps", 1},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps/x", 1},
		{http.MethodPost, "/api/v1/namespaces/a/configmaps", 1},
		{http.MethodDelete, "/api/v1/namespaces/a/configmaps/x?watch=true", 1},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=false", 1},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=0", 1},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=true", 2},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=1", 2},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch", 2},
		{http.MethodGet, "/api/v1/namespaces/a/configmaps?watch=True&resourceVersion=5", 2},
		{http.MethodGet, "/api/v1/watch/namespaces/a/configmaps", 2},
		{http.MethodGet, "/apis/example.com/v1/watch/widgets", 2},
	} {
		req, err := http.NewRequest(tt.method, s.URL+tt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.ProtoMajor != tt.proto {
			t.Errorf("%s %s went over %s, want HTTP/%d", tt.method, tt.path, resp.Proto, tt.proto)
		}
	}
}

// transportTo is a Transport to the one replica backend, trusting its
// certificate.
func transportTo(t testing.TB, backend *httptest.Server) *proxy.Transport {
	t.Helper()
	tr, err := proxy.NewTransport([]*url.URL{mustParse(t, backend.URL)}, backend.Client().Transport.(*http.Transport).TLSClientConfig)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func mustParse(t testing.TB, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
