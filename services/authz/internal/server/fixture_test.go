package server

import (
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
)

// startAPI serves the kinds authz reads from libs' apitest server: what
// the gateway serves authz, minus the gateway.
func startAPI(t testing.TB) *apitest.Server {
	t.Helper()
	v1, rbac := corev1.SchemeGroupVersion, rbacv1.SchemeGroupVersion
	return apitest.Start(t, apitest.Options{Resources: []*resource.Resource{
		apitest.Typed(t, v1.WithResource("namespaces"), "Namespace", false),
		apitest.Typed(t, v1.WithResource("configmaps"), "ConfigMap", true),
		apitest.Typed(t, rbac.WithResource("roles"), "Role", true),
		apitest.Typed(t, rbac.WithResource("rolebindings"), "RoleBinding", true),
		apitest.Typed(t, rbac.WithResource("clusterroles"), "ClusterRole", false),
		apitest.Typed(t, rbac.WithResource("clusterrolebindings"), "ClusterRoleBinding", false),
	}})
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
	nats *natstest.Server
	api  *apitest.Server
	// kubeconfig names api.
	kubeconfig string
	certs      *certs
}

func newEnv(t testing.TB) *env {
	t.Helper()
	api := startAPI(t)
	return &env{nats: natstest.Start(t), api: api, kubeconfig: api.Kubeconfig(t), certs: newCerts(t)}
}

// options are a replica's flags in e.
func (e *env) options() *Options {
	o := NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile, o.ClientCAFile = e.certs.certFile, e.certs.keyFile, e.certs.caFile
	o.NATS.URL = e.nats.URL
	o.Kubeconfig = e.kubeconfig
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
	cfg, err := o.Config(apitest.LogWriter{T: t})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Server: s, stop: apitest.Run(t, "authz", s.Run)}
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
