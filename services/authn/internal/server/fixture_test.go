package server

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	authenticationv1 "k8s.io/api/authentication/v1"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
	authnproto "kplane.dev/proto/authn"
	"kplane.dev/services/authn/internal/apifixture"
)

// env is what replicas of one test share: NATS, the API, certificates and
// the signing key.
type env struct {
	nats *natstest.Server
	nc   *nats.Conn
	api  *apitest.Server
	// kubeconfig names api, when there is one.
	kubeconfig string
	dir        string
	ca         *pki.Cert
	// client is a client certificate of the CA, for webhook callers.
	client   tls.Certificate
	caPool   *x509.CertPool
	tlsFiles pki.Files
	caFile   string
	keyFile  string
	tokens   string
}

// staticToken is alice's line in the token file.
const staticToken = "static-token-of-alice"

func newEnv(t testing.TB, withAPI bool) *env {
	t.Helper()
	e := &env{nats: natstest.Start(t), dir: t.TempDir()}
	e.nc = e.nats.Connect(t)
	if withAPI {
		e.api = apifixture.Start(t)
		e.kubeconfig = e.api.Kubeconfig(t)
	}
	d := pki.Dir{Path: filepath.Join(e.dir, "pki")}
	var err error
	if e.ca, err = d.CA("ca", "kplane-ca"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Serving(e.ca, "authn", "kplane-authn", []string{"127.0.0.1", "localhost"}); err != nil {
		t.Fatal(err)
	}
	client, err := d.Client(e.ca, "gateway", "system:kplane-gateway", nil)
	if err != nil {
		t.Fatal(err)
	}
	e.client = client.TLSCertificate()
	e.caPool = e.ca.Pool()
	e.tlsFiles = d.Files("authn")
	e.caFile = d.Files("ca").Cert

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	e.keyFile = e.write(t, "sa.key", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	e.tokens = e.write(t, "tokens.csv", []byte(staticToken+`,alice,uid-alice,"dev,ops"`+"\n"))
	return e
}

func (e *env) write(t testing.TB, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(e.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// options are a replica's flags in e.
func (e *env) options() *Options {
	o := NewOptions()
	o.ListenAddress = "127.0.0.1:0"
	o.TLSCertFile, o.TLSPrivateKeyFile = e.tlsFiles.Cert, e.tlsFiles.Key
	o.ClientCAFile = e.caFile
	o.NATS.URL = e.nats.URL
	o.TokenAuthFile = e.tokens
	o.ServiceAccountSigningKeyFile = e.keyFile
	o.ShutdownTimeout = 5 * time.Second
	if e.api != nil {
		o.Kubeconfig = e.kubeconfig
	} else {
		o.ServiceAccountLookup, o.EnableBootstrapTokenAuth = false, false
	}
	return o
}

// replica is a running Server and the means to stop it.
type replica struct {
	*Server
	stop func()
}

// start runs a replica of o until the test ends; change may adjust its
// Config before it is built.
func start(t testing.TB, o *Options, change func(*Config)) *replica {
	t.Helper()
	cfg, err := o.Config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		change(cfg)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Server: s, stop: apitest.Run(t, "authn", s.Run)}
	pool, err := pki.LoadPool(o.ClientCAFile)
	if err != nil {
		t.Fatal(err)
	}
	r.waitReady(t, pool)
	return r
}

// waitReady polls /readyz: NATS subscribed and informers synced.
func (r *replica) waitReady(t testing.TB, ca *x509.CertPool) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca}}, Timeout: time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get("https://" + r.Addr().String() + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("authn not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// review sends a TokenReview over NATS.
func review(t testing.TB, nc *nats.Conn, token string, auds ...string) *authenticationv1.TokenReview {
	t.Helper()
	out, err := reviewErr(nc, token, auds...)
	if err != nil {
		t.Fatalf("token review: %v", err)
	}
	return out
}

func reviewErr(nc *nats.Conn, token string, auds ...string) (*authenticationv1.TokenReview, error) {
	in := authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: auds}}
	var out authenticationv1.TokenReview
	if err := natsrpc.RequestJSON(context.Background(), nc, authnproto.SubjectTokenReview, &in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// requestToken asks for a token of a service account over NATS.
func requestToken(nc *nats.Conn, ns, name, uid string, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	raw, err := jsonMarshal(req)
	if err != nil {
		return nil, err
	}
	in := authnproto.TokenRequest{Namespace: ns, ServiceAccountName: name, ServiceAccountUID: uid, Request: raw}
	var out authenticationv1.TokenRequest
	if err := natsrpc.RequestJSON(context.Background(), nc, authnproto.SubjectTokenRequest, &in, &out); err != nil {
		return nil, err
	}
	if out.Status.Token == "" {
		return nil, errors.New("no token in the reply")
	}
	return &out, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
