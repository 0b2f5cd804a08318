package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/faultproxy"
	"kplane.dev/libs/storage/cacher"
)

// Options shape the test server.
type Options struct {
	// Resources are what the server serves; nil serves configmaps and
	// widgets (see Resources).
	Resources []*resource.Resource
	// Configure, when set, adjusts the server's options once its etcd
	// stores exist and before it is built, for what only a caller knows:
	// stores wrapped around the etcd ones, admission that reads them.
	Configure func(*server.Options) error
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
	// Client is a clientset of Config.
	Client kubernetes.Interface
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

// Kubeconfig writes a kubeconfig file naming URL, with no credentials, in
// a directory of the test, for components that take --kubeconfig.
func (s *Server) Kubeconfig(t testing.TB) string {
	t.Helper()
	return writeKubeconfig(t, s.URL)
}

// UnreachableKubeconfig is a kubeconfig whose server nothing answers on:
// for a component that must cope with an API it cannot reach.
func UnreachableKubeconfig(t testing.TB) string {
	t.Helper()
	return writeKubeconfig(t, "https://127.0.0.1:1")
}

func writeKubeconfig(t testing.TB, server string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["api"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["api"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "api"}
	kc.CurrentContext = "api"
	path := filepath.Join(t.TempDir(), "api.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// Start runs a test server until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	etcd := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
	client := etcd.Client(t)
	res := o.Resources
	if res == nil {
		var err error
		if res, err = Resources(o.Clock); err != nil {
			t.Fatalf("declare resources: %v", err)
		}
	}
	stores := server.CachedEtcdStores(client, "/kplane", nil, nil, o.Cacher...)
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
		Logger:         slog.New(slog.NewTextHandler(LogWriter{t}, nil)),
	}
	if o.Configure != nil {
		if err := o.Configure(&opts); err != nil {
			t.Fatalf("configure server: %v", err)
		}
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
	// Cleanups run last first: watches end before the HTTP server closes,
	// or Close would wait for their streams.
	t.Cleanup(hs.Close)
	Run(t, "server", srv.Run)
	s.URL = hs.URL
	if o.Proxy {
		s.Proxy = faultproxy.Start(t, hs.Listener.Addr().String())
		s.URL = "http://" + s.Proxy.Addr()
	}
	s.Config = &restclient.Config{Host: s.URL, QPS: -1}
	s.DirectConfig = &restclient.Config{Host: hs.URL, QPS: -1}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return s
}

// Run runs what (a server, a controller) until the test ends or the
// returned stop is called, whichever comes first, and fails the test if
// run returns an error; name says what failed.
func Run(t testing.TB, name string, run func(context.Context) error) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run %s: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// LogWriter sends a component's log to the test's, so a failing test
// shows what the component could not tell its client.
type LogWriter struct{ T testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.T.Log(string(p))
	return len(p), nil
}
