package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/faultproxy"
	"kplane.dev/libs/storage/cacher"
)

// Options shape the test server.
type Options struct {
	// Direct serves from etcd with no watch cache.
	Direct bool
	// Cacher configures the watch caches (bookmark interval, history...).
	Cacher []cacher.Option
	// Clock stamps creation times and ages; nil is the real clock.
	Clock clock.PassiveClock
	// Proxy puts a faultproxy between clients and the server.
	Proxy bool
}

// Server is a running test server.
type Server struct {
	// URL is where clients connect: the proxy's address when there is one.
	URL string
	// Config is a client-go config for URL.
	Config *restclient.Config
	// DirectConfig reaches the server without the proxy, for writes a
	// test makes while the proxy is cut.
	DirectConfig *restclient.Config
	// Etcd is a client of the server's etcd, for compaction and checks.
	Etcd *clientv3.Client
	// Server is the API server.
	Server *server.Server
	// Proxy is the fault proxy, nil without Options.Proxy.
	Proxy *faultproxy.Proxy

	mu       sync.Mutex
	requests []*url.URL
}

// Requests returns the URLs of the GET requests the server received so
// far, in order, so a test can see what a client asked for (a relist, a
// watch from a resourceVersion).
func (s *Server) Requests() []*url.URL {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) record(r *http.Request) {
	if r.Method != http.MethodGet {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r.URL)
}

// Start runs a test server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	etcd := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
	client := etcd.Client(t)
	res, err := Resources(o.Clock)
	if err != nil {
		t.Fatalf("declare resources: %v", err)
	}
	stores := server.CachedEtcdStores(client, "/kplane", nil, o.Cacher...)
	if o.Direct {
		stores = server.EtcdStores(client, "/kplane", nil)
	}
	var handlerOpts []rest.Option
	if o.Clock != nil {
		handlerOpts = append(handlerOpts, rest.WithClock(o.Clock))
	}
	opts := server.Options{
		Resources:      res,
		Stores:         stores,
		HandlerOptions: handlerOpts,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatalf("server config: %v", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("build server: %v", err)
	}
	s := &Server{Etcd: client, Server: srv}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.record(r)
		srv.Handler().ServeHTTP(w, r)
	}))
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		// Watches end before the HTTP server closes, or Close would
		// wait for their streams.
		stop()
		if err := <-done; err != nil {
			t.Errorf("run server: %v", err)
		}
		hs.Close()
	})
	s.URL = hs.URL
	if o.Proxy {
		s.Proxy = faultproxy.Start(t, hs.Listener.Addr().String())
		s.URL = "http://" + s.Proxy.Addr()
	}
	s.Config = &restclient.Config{Host: s.URL, QPS: -1}
	s.DirectConfig = &restclient.Config{Host: hs.URL, QPS: -1}
	return s
}

// testWriter sends the server's log to the test's, so a failing test shows
// what the server could not tell its client.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
