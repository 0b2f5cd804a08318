package frontproxy_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"

	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/pki"
)

// seen is what the handler behind the authenticator observed.
type seen struct {
	User    *frontproxy.User `json:"user"`
	Headers []string         `json:"headers"`
}

// echoIdentity answers with the request's user and any identity header
// that reached it, as a ConfigMap so client-go can read it too.
func echoIdentity(w http.ResponseWriter, r *http.Request) {
	s := seen{}
	if u, ok := frontproxy.UserFrom(r.Context()); ok {
		s.User = u
	}
	for name := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "x-remote-") {
			s.Headers = append(s.Headers, name)
		}
	}
	data, _ := json.Marshal(s)
	cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "who", Namespace: "default"}, Data: map[string]string{"seen": string(data)}}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(cm)
}

type certs struct {
	ca, gateway, wrongCN, otherCA *pki.Cert
}

func newCerts(t *testing.T) certs {
	t.Helper()
	now := time.Now()
	must := func(c *pki.Cert, err error) *pki.Cert {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca := must(pki.NewCA("front-proxy-ca", now))
	other := must(pki.NewCA("other-ca", now))
	return certs{
		ca:      ca,
		gateway: must(ca.Client("front-proxy-client", nil, now)),
		wrongCN: must(ca.Client("someone-else", nil, now)),
		otherCA: must(other.Client("front-proxy-client", nil, now)),
	}
}

// startTLS serves the authenticator over real TLS, asking for client
// certificates without requiring them, as a storage service does.
func startTLS(t *testing.T, c certs, allowed []string) *httptest.Server {
	t.Helper()
	auth, err := frontproxy.New(frontproxy.Options{ClientCA: c.ca.Pool(), AllowedNames: allowed})
	if err != nil {
		t.Fatal(err)
	}
	serving, err := c.ca.Serving("core", nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(auth.Wrap(http.HandlerFunc(echoIdentity)))
	hs.TLS = &tls.Config{Certificates: []tls.Certificate{serving.TLSCertificate()}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	hs.StartTLS()
	t.Cleanup(hs.Close)
	return hs
}

func client(c certs, cert *pki.Cert) *http.Client {
	cfg := &tls.Config{RootCAs: c.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestAuthenticator(t *testing.T) {
	c := newCerts(t)
	hs := startTLS(t, c, []string{"front-proxy-client"})
	identity := http.Header{
		"X-Remote-User":                      {"alice"},
		"X-Remote-Uid":                       {"uid-1"},
		"X-Remote-Group":                     {"dev", "system:authenticated"},
		"X-Remote-Extra-Scopes":              {"a", "b"},
		"X-Remote-Extra-Example.com%2fteam":  {"blue"},
		"X-Remote-Extra-Example.com%2FLevel": {"7"},
	}
	tests := []struct {
		name    string
		cert    *pki.Cert
		headers http.Header
		want    *frontproxy.User
	}{
		{
			name:    "gateway certificate with identity",
			cert:    c.gateway,
			headers: identity,
			want: &frontproxy.User{Name: "alice", UID: "uid-1", Groups: []string{"dev", "system:authenticated"}, Extra: map[string][]string{
				"scopes": {"a", "b"}, "example.com/team": {"blue"}, "example.com/level": {"7"},
			}},
		},
		{name: "gateway certificate, user only", cert: c.gateway, headers: http.Header{"X-Remote-User": {"bob"}}, want: &frontproxy.User{Name: "bob"}},
		{name: "gateway certificate, blank user", cert: c.gateway, headers: http.Header{"X-Remote-User": {" "}, "X-Remote-Group": {"system:masters"}}},
		{name: "no client certificate", headers: identity},
		{name: "certificate with another CN", cert: c.wrongCN, headers: identity},
		{name: "certificate of another CA", cert: c.otherCA, headers: identity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, hs.URL+"/api/v1/namespaces/default/configmaps/who", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header = tt.headers.Clone()
			resp, err := client(c, tt.cert).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				assertUnauthorized(t, resp.StatusCode, body)
				return
			}
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			got := readSeen(t, body)
			if !reflect.DeepEqual(got.User, tt.want) {
				t.Errorf("user = %+v, want %+v", got.User, tt.want)
			}
			if len(got.Headers) > 0 {
				t.Errorf("identity headers reached the handler: %v", got.Headers)
			}
		})
	}
}

func TestAllowedNamesAreRequired(t *testing.T) {
	c := newCerts(t)
	for _, names := range [][]string{nil, {}, {""}, {" "}} {
		if _, err := frontproxy.New(frontproxy.Options{ClientCA: c.ca.Pool(), AllowedNames: names}); !errors.Is(err, frontproxy.ErrNoAllowedNames) {
			t.Errorf("New with allowed names %q: err = %v, want ErrNoAllowedNames", names, err)
		}
	}
}

func assertUnauthorized(t *testing.T, code int, body []byte) {
	t.Helper()
	if code != http.StatusUnauthorized {
		t.Fatalf("status %d, want 401: %s", code, body)
	}
	var st metav1.Status
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("decode status: %v: %s", err, body)
	}
	want := metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401}
	if !reflect.DeepEqual(st, want) {
		t.Errorf("status = %+v, want %+v", st, want)
	}
}

func readSeen(t *testing.T, body []byte) seen {
	t.Helper()
	var cm corev1.ConfigMap
	if err := json.Unmarshal(body, &cm); err != nil {
		t.Fatalf("decode: %v: %s", err, body)
	}
	var s seen
	if err := json.Unmarshal([]byte(cm.Data["seen"]), &s); err != nil {
		t.Fatalf("decode seen: %v", err)
	}
	return s
}

// withIdentity is how the gateway's client adds the caller's identity.
func withIdentity(user string, groups ...string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("X-Remote-User", user)
			for _, g := range groups {
				r.Header.Add("X-Remote-Group", g)
			}
			return rt.RoundTrip(r)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestClientGo(t *testing.T) {
	c := newCerts(t)
	hs := startTLS(t, c, []string{"front-proxy-client"})
	config := func(cert *pki.Cert) *restclient.Config {
		cfg := &restclient.Config{Host: hs.URL, TLSClientConfig: restclient.TLSClientConfig{CAData: c.ca.CertPEM()}, WrapTransport: withIdentity("dave", "ops")}
		if cert != nil {
			key, err := cert.KeyPEM()
			if err != nil {
				t.Fatal(err)
			}
			cfg.CertData, cfg.KeyData = cert.CertPEM(), key
		}
		return cfg
	}
	get := func(cfg *restclient.Config) (*corev1.ConfigMap, error) {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs.CoreV1().ConfigMaps("default").Get(context.Background(), "who", metav1.GetOptions{})
	}

	cm, err := get(config(c.gateway))
	if err != nil {
		t.Fatalf("get through the gateway's certificate: %v", err)
	}
	var s seen
	if err := json.Unmarshal([]byte(cm.Data["seen"]), &s); err != nil {
		t.Fatal(err)
	}
	if want := (&frontproxy.User{Name: "dave", Groups: []string{"ops"}}); !reflect.DeepEqual(s.User, want) {
		t.Errorf("user = %+v, want %+v", s.User, want)
	}
	for name, cert := range map[string]*pki.Cert{"no certificate": nil, "wrong CN": c.wrongCN, "other CA": c.otherCA} {
		t.Run(name, func(t *testing.T) {
			_, err := get(config(cert))
			if !apierrors.IsUnauthorized(err) {
				t.Errorf("err = %v, want Unauthorized", err)
			}
		})
	}
}

func TestLoopback(t *testing.T) {
	core := frontproxy.User{Name: "system:kplane:core", Groups: []string{"system:masters"}}
	streamEnded := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/namespaces/default/configmaps/who", echoIdentity)
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		defer close(streamEnded)
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "first\n")
		http.NewResponseController(w).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/panic", func(http.ResponseWriter, *http.Request) { panic("boom") })
	cfg := frontproxy.LoopbackConfig(mux, core)

	t.Run("client-go request carries the loopback user, not headers", func(t *testing.T) {
		cfg := restclient.CopyConfig(cfg)
		cfg.WrapTransport = withIdentity("mallory", "system:masters")
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := cs.CoreV1().ConfigMaps("default").Get(context.Background(), "who", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var s seen
		if err := json.Unmarshal([]byte(cm.Data["seen"]), &s); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(s.User, &core) || len(s.Headers) > 0 {
			t.Errorf("seen = %+v, want user %+v and no identity headers", s, core)
		}
	})
	t.Run("responses stream and closing ends the handler", func(t *testing.T) {
		rc, err := restclient.RESTClientFor(withCodec(cfg))
		if err != nil {
			t.Fatal(err)
		}
		body, err := rc.Get().AbsPath("/stream").Stream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(body).ReadString('\n')
		if err != nil || line != "first\n" {
			t.Fatalf("first line = %q, %v", line, err)
		}
		select {
		case <-streamEnded:
			t.Fatal("handler ended before the body was closed")
		default:
		}
		if err := body.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-streamEnded:
		default:
			t.Fatal("handler still running after Close returned")
		}
	})
	t.Run("a panic is an error, not a crash", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, frontproxy.LoopbackHost+"/panic", nil)
		_, err := cfg.Transport.RoundTrip(req)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Errorf("err = %v, want the panic", err)
		}
	})
	t.Run("unknown path answers 404", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, frontproxy.LoopbackHost+"/nowhere", nil)
		resp, err := cfg.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d, want 404", resp.StatusCode)
		}
	})
}

func withCodec(cfg *restclient.Config) *restclient.Config {
	cfg = restclient.CopyConfig(cfg)
	cfg.APIPath = "/api"
	cfg.GroupVersion = &corev1.SchemeGroupVersion
	cfg.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	return cfg
}
