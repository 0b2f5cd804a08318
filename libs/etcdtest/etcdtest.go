package etcdtest

import (
	"net/url"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Server is a running embedded etcd.
type Server struct {
	// Endpoint is the client URL, such as http://127.0.0.1:41234. It stays
	// the same across Restart.
	Endpoint string
	cfg      *embed.Config

	mu   sync.Mutex
	etcd *embed.Etcd // nil while stopped
}

// Option changes the embedded etcd's configuration before it starts.
type Option func(*embed.Config)

// WithProgressNotifyInterval makes etcd send watch progress notifications
// this often (etcd's default is ten minutes).
func WithProgressNotifyInterval(d time.Duration) Option {
	return func(c *embed.Config) { c.WatchProgressNotifyInterval = d }
}

// Start runs etcd until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	loopback := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls = []url.URL{loopback}
	cfg.AdvertiseClientUrls = []url.URL{loopback}
	cfg.ListenPeerUrls = []url.URL{loopback}
	cfg.AdvertisePeerUrls = []url.URL{loopback}
	cfg.InitialCluster = "default=http://127.0.0.1:0"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	for _, o := range opts {
		o(cfg)
	}
	s := &Server{cfg: cfg}
	e := s.start(t)
	s.Endpoint = "http://" + e.Clients[0].Addr().String()
	// A restart must come back where clients look for it.
	cfg.ListenClientUrls = []url.URL{{Scheme: "http", Host: e.Clients[0].Addr().String()}}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	t.Cleanup(s.Stop)
	return s
}

func (s *Server) start(t testing.TB) *embed.Etcd {
	t.Helper()
	e, err := embed.StartEtcd(s.cfg)
	if err != nil {
		t.Fatalf("start embedded etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("embedded etcd not ready after 30s")
	}
	s.mu.Lock()
	s.etcd = e
	s.mu.Unlock()
	return e
}

// Client returns a client of the server, closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{s.Endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("connect to embedded etcd: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop shuts etcd down before the test ends, to exercise reconnects.
// Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.etcd != nil {
		s.etcd.Close()
		s.etcd = nil
	}
}

// Restart stops etcd if it runs and starts it again on the same data and
// client address, so existing clients reconnect to the same history.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	s.start(t)
}
