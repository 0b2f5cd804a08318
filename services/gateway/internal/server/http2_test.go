package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkWatchEventOnABusyConnection measures one watch event written
// and read over an HTTP/2 connection that also carries idle watches, as
// a client's informers share one: with the gateway's HTTP/2
// configuration and with Go's default.
func BenchmarkWatchEventOnABusyConnection(b *testing.B) {
	for _, c := range []struct {
		name      string
		configure func(*http.Server) error
	}{
		{"default", func(*http.Server) error { return nil }},
		{"gateway", configureHTTP2},
	} {
		for _, idle := range []int{0, 200} {
			b.Run(c.name+"/idle="+strconv.Itoa(idle), func(b *testing.B) {
				benchmarkWatchEvents(b, c.configure, idle)
			})
		}
	}
}

// watchEvent is about the size of a ConfigMap's watch event.
var watchEvent = []byte(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-1","namespace":"default","resourceVersion":"12345"},"data":{"seq":"1"}}}` + "\n")

func benchmarkWatchEvents(b *testing.B, configure func(*http.Server) error, idle int) {
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		if err := rc.Flush(); err != nil {
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("events"))
		if n == 0 {
			<-r.Context().Done()
			return
		}
		for range n {
			if _, err := w.Write(watchEvent); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}))
	ts.EnableHTTP2 = true
	if err := configure(ts.Config); err != nil {
		b.Fatal(err)
	}
	ts.StartTLS()
	defer ts.Close()
	client := ts.Client()
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	get := func(query string) *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/watch"+query, nil)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.ProtoMajor != 2 {
			b.Fatalf("got %s, want HTTP/2", resp.Proto)
		}
		return resp
	}
	for range idle {
		defer get("").Body.Close()
	}
	b.ResetTimer()
	resp := get("?events=" + strconv.Itoa(b.N))
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	if want := int64(b.N * len(watchEvent)); n != want {
		b.Fatalf("read %d bytes, want %d", n, want)
	}
}
