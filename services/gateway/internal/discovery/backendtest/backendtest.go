// Package backendtest starts backends for the gateway's tests: real API
// servers built from kplane.dev/libs/apiserver/server on a real embedded
// etcd, serving their discovery and OpenAPI documents over HTTP, that a
// test can stop and start again on the same address.
package backendtest

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/server"
)

// Backend is a running API server.
type Backend struct {
	// URL is the server's base URL; it stays the same across Stop and Start.
	URL *url.URL
	// Config is a client-go config for URL.
	Config *restclient.Config
	// Server is the API server, whose resources a test may replace.
	Server *server.Server

	handler http.Handler
	addr    string

	mu   sync.Mutex
	http *http.Server
	done chan error
}

// Resources are the apitest resources of the given group-versions and
// resources.
func Resources(t testing.TB, gvrs ...schema.GroupVersionResource) []*resource.Resource {
	t.Helper()
	all, err := apitest.Resources(nil)
	if err != nil {
		t.Fatalf("declare resources: %v", err)
	}
	var out []*resource.Resource
	for _, r := range all {
		if slices.Contains(gvrs, r.GroupVersionResource) {
			out = append(out, r)
		}
	}
	return out
}

// Start runs a server of resources, stored in etcd under prefix, until the
// test ends.
func Start(t testing.TB, etcd *clientv3.Client, prefix string, resources []*resource.Resource) *Backend {
	t.Helper()
	opts := server.Options{Resources: resources, Stores: server.EtcdStores(etcd, prefix, nil)}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatalf("server config: %v", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("build server: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- srv.Run(ctx) }()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	b := &Backend{handler: srv.Handler(), addr: ln.Addr().String(), Server: srv}
	b.URL = &url.URL{Scheme: "http", Host: b.addr}
	b.Config = &restclient.Config{Host: b.URL.String(), QPS: -1}
	b.serve(ln)
	t.Cleanup(func() {
		b.Stop(t)
		stop()
		if err := <-ran; err != nil {
			t.Errorf("run server: %v", err)
		}
	})
	return b
}

func (b *Backend) serve(ln net.Listener) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.http = &http.Server{Handler: b.handler}
	b.done = make(chan error, 1)
	go func(s *http.Server, done chan<- error) { done <- s.Serve(ln) }(b.http, b.done)
}

// Stop closes the listener and every connection: clients are refused
// until Start.
func (b *Backend) Stop(t testing.TB) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.http == nil {
		return
	}
	if err := b.http.Close(); err != nil {
		t.Errorf("close backend: %v", err)
	}
	if err := <-b.done; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("serve backend: %v", err)
	}
	b.http = nil
}

// Start serves again on the same address.
func (b *Backend) Start(t testing.TB) {
	t.Helper()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		t.Fatalf("listen again on %s: %v", b.addr, err)
	}
	b.serve(ln)
}

// Logger is a logger writing to the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
