package proxy_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"kplane.dev/services/gateway/internal/proxy"
)

// deadReplica is the URL of a port nothing listens on any more.
func deadReplica(t *testing.T) *url.URL {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return &url.URL{Scheme: "https", Host: addr}
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
