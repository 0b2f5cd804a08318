package server

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
)

// api is a kube-compatible API server built from kplane's generic API
// layer over a real etcd, serving the kinds authz reads: what the gateway
// serves authz, minus the gateway.
type api struct {
	config     *restclient.Config
	client     kubernetes.Interface
	kubeconfig string
}

func startAPI(t testing.TB) *api {
	t.Helper()
	etcd := etcdtest.Start(t)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := rbacv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		gv                       schema.GroupVersion
		resource, kind, singular string
		namespaced               bool
	}{
		{corev1.SchemeGroupVersion, "namespaces", "Namespace", "namespace", false},
		{corev1.SchemeGroupVersion, "configmaps", "ConfigMap", "configmap", true},
		{rbacv1.SchemeGroupVersion, "roles", "Role", "role", true},
		{rbacv1.SchemeGroupVersion, "rolebindings", "RoleBinding", "rolebinding", true},
		{rbacv1.SchemeGroupVersion, "clusterroles", "ClusterRole", "clusterrole", false},
		{rbacv1.SchemeGroupVersion, "clusterrolebindings", "ClusterRoleBinding", "clusterrolebinding", false},
	}
	var res []*resource.Resource
	for _, k := range kinds {
		objs, err := objects.NewTyped(scheme, k.gv.WithKind(k.kind), k.kind+"List")
		if err != nil {
			t.Fatal(err)
		}
		res = append(res, &resource.Resource{
			GroupVersionResource: k.gv.WithResource(k.resource),
			Kind:                 k.kind, Singular: k.singular, Namespaced: k.namespaced, Objects: objs,
		})
	}
	opts := apiserver.Options{
		Resources: res,
		Stores:    apiserver.CachedEtcdStores(etcd.Client(t), "/kplane", nil),
		Logger:    slog.New(slog.DiscardHandler),
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := apiserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run API server: %v", err)
		}
		hs.Close()
	})
	a := &api{config: &restclient.Config{Host: hs.URL, QPS: -1}}
	if a.client, err = kubernetes.NewForConfig(a.config); err != nil {
		t.Fatal(err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["api"] = &clientcmdapi.Cluster{Server: hs.URL}
	kc.AuthInfos["authz"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["api"] = &clientcmdapi.Context{Cluster: "api", AuthInfo: "authz"}
	kc.CurrentContext = "api"
	a.kubeconfig = filepath.Join(t.TempDir(), "authz.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, a.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return a
}

// certs are the PKI of a test: a CA that signs authz's serving certificate
// and the webhook callers' client certificates, as files.
type certs struct {
	ca                        *pki.Cert
	caFile, certFile, keyFile string
	client                    *pki.Cert
}

func newCerts(t testing.TB) *certs {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("kplane-test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("kplane-authz", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("kube-apiserver", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &certs{ca: ca, client: client,
		caFile: filepath.Join(dir, "ca.crt"), certFile: filepath.Join(dir, "authz.crt"), keyFile: filepath.Join(dir, "authz.key")}
	key, err := serving.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{c.caFile: ca.CertPEM(), c.certFile: serving.CertPEM(), c.keyFile: key} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// env is what replicas of authz share: NATS, the API and the PKI.
type env struct {
	nats  *natstest.Server
	api   *api
	certs *certs
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return &env{nats: natstest.Start(t), api: startAPI(t), certs: newCerts(t)}
}

// options are a replica's flags in e.
func (e *env) options() *Options {
	o := NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = e.certs.certFile, e.certs.keyFile, e.certs.caFile
	o.NATS.URL = e.nats.URL
	o.Kubeconfig = e.api.kubeconfig
	o.ShutdownTimeout = 10 * time.Second
	return o
}

// replica is a running authz replica.
type replica struct {
	*Server
	stop func()
}

// start runs a replica with o until the test ends or stop is called, and
// waits until it is ready.
func start(t testing.TB, o *Options) *replica {
	t.Helper()
	cfg, err := o.Config(testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	stopped := false
	r := &replica{Server: s, stop: func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run authz: %v", err)
		}
	}}
	t.Cleanup(r.stop)
	deadline := time.Now().Add(10 * time.Second)
	for !s.feed.HasSynced() || !s.nats.IsConnected() {
		if time.Now().After(deadline) {
			t.Fatal("authz not ready after 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return r
}

// httpsClient reaches a replica, with cert as its client certificate
// (none when nil).
func (e *env) httpsClient(cert *pki.Cert) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: e.certs.ca.Pool()}
	if cert != nil {
		tr.TLSClientConfig.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// conn is a NATS connection of a client, such as the gateway.
func (e *env) conn(t testing.TB) *nats.Conn { return e.nats.Connect(t) }

// testWriter sends the server's log to the test's.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
