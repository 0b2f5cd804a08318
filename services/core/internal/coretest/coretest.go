package coretest

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/natstest"
	"kplane.dev/proto/access"
	"kplane.dev/services/core/internal/server"
)

// readyTimeout bounds the wait for a replica's /readyz.
const readyTimeout = 30 * time.Second

// Options shape the test installation.
type Options struct {
	// Replicas is how many replicas to start; 0 means one.
	Replicas int
	// NATS starts an embedded NATS server with JetStream, and the
	// replicas publish the change feed to it.
	NATS bool
	// Modify changes each replica's options before it is built, such as
	// its compaction interval.
	Modify func(*server.Options)
}

// Cluster is a running test installation.
type Cluster struct {
	Etcd       *etcdtest.Server
	EtcdClient *clientv3.Client
	Certs      *Certs
	// NATS is the embedded NATS server, admitting each service with its
	// own key and permissions; nil without Options.NATS.
	NATS     *natstest.Server
	Replicas []*Replica
}

// Replica is one running replica.
type Replica struct {
	// URL is the replica's https:// address.
	URL string
	// Config reaches the replica as the gateway does, for Admin.
	Config *restclient.Config
	Server *server.Server

	cluster *Cluster
	stop    context.CancelFunc
	done    chan error
	once    sync.Once
	err     error
}

// Start runs an etcd and the replicas until the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	n := o.Replicas
	if n == 0 {
		n = 1
	}
	etcd := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
	c := &Cluster{Etcd: etcd, EtcdClient: etcd.Client(t), Certs: NewCerts(t)}
	if o.NATS {
		c.NATS = natstest.StartWithAccess(t)
	}
	for range n {
		c.Replicas = append(c.Replicas, c.start(t, o.Modify))
	}
	for _, r := range c.Replicas {
		r.waitReady(t)
	}
	return c
}

// Options are the flags of a replica of c, as a test would pass them.
func (c *Cluster) Options() *server.Options {
	o := server.NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile = c.Certs.Serving.Cert, c.Certs.Serving.Key
	o.ClientCAFile = c.Certs.CAFile
	o.RequestHeaderAllowedNames = []string{GatewayName}
	o.EtcdServers = []string{c.Etcd.Endpoint}
	o.ShutdownTimeout = 10 * time.Second
	if c.NATS != nil {
		o.NATS = c.NATS.ConnOptions(access.Core)
	}
	return o
}

func (c *Cluster) start(t testing.TB, modify func(*server.Options)) *Replica {
	t.Helper()
	o := c.Options()
	if modify != nil {
		modify(o)
	}
	cfg, err := o.Config(testWriter{t})
	if err != nil {
		t.Fatalf("replica config: %v", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("build replica: %v", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	r := &Replica{URL: "https://" + srv.Addr().String(), Server: srv, cluster: c, stop: stop, done: make(chan error, 1)}
	r.Config = c.Certs.Config(t, r.URL, c.Certs.Gateway, Admin)
	go func() { r.done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		if err := r.Stop(); err != nil {
			t.Errorf("run replica %s: %v", r.URL, err)
		}
	})
	return r
}

// As is a config of r for u, through the gateway's certificate.
func (r *Replica) As(t testing.TB, u frontproxy.User) *restclient.Config {
	t.Helper()
	return r.cluster.Certs.Config(t, r.URL, r.cluster.Certs.Gateway, u)
}

// Stop shuts r down and returns what its Run returned; later calls return
// the same.
func (r *Replica) Stop() error {
	r.once.Do(func() {
		r.stop()
		r.err = <-r.done
	})
	return r.err
}

// waitReady polls /readyz until it answers ok.
func (r *Replica) waitReady(t testing.TB) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: r.cluster.Certs.CA.Pool(), MinVersion: tls.VersionTLS12}}}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		resp, err := client.Get(r.URL + "/readyz")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = errors.New(string(body))
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("replica %s not ready after %v: %v", r.URL, readyTimeout, last)
}

// testWriter sends a replica's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
