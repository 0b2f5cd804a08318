package server_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
	"kplane.dev/services/gateway/internal/server"
)

// installation is etcd, cores and a gateway in front of them.
type installation struct {
	etcd  *etcdtest.Server
	certs *certs
	cores []*core
	gw    *gateway
	admin *pki.Cert
	auth  *authServices
}

// start runs etcd, replicas of core and a gateway in front of them, with
// the gateway's options changed by modify when it is not nil.
func start(t *testing.T, replicas int, modify func(o *server.Options)) *installation {
	t.Helper()
	etcd := etcdtest.Start(t)
	c := newCerts(t)
	in := &installation{etcd: etcd, certs: c, admin: c.client(t, "alice", "system:masters")}
	for range replicas {
		in.cores = append(in.cores, startCore(t, c, etcd))
	}
	in.auth = startAuth(t)
	o := gatewayOptions(c, in.auth.nats.URL, in.cores...)
	if modify != nil {
		modify(o)
	}
	in.gw = startGateway(t, o)
	return in
}

func (in *installation) get(t *testing.T, cert *pki.Cert, token, path string, header http.Header) (int, []byte, http.Header) {
	t.Helper()
	client := in.certs.httpClient(t, cert)
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, in.gw.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

func TestAuthentication(t *testing.T) {
	in := start(t, 1, nil)
	carol := in.certs.client(t, "carol", "developers")
	tests := []struct {
		name     string
		cert     *pki.Cert
		token    string
		path     string
		header   http.Header
		wantCode int
		wantBody string
	}{
		{name: "masters certificate", cert: in.admin, path: "/api/v1/namespaces/default/configmaps", wantCode: 200},
		{name: "masters token", token: "admintoken", path: "/api/v1/namespaces/default/configmaps", wantCode: 200},
		{name: "no credentials is anonymous", path: "/api/v1/namespaces/default/configmaps", wantCode: 403,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"system:anonymous\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`},
		{name: "anonymous discovery", path: "/api", wantCode: 403,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/api\"","reason":"Forbidden","details":{},"code":403}`},
		{name: "unknown token is refused though anonymous is on", token: "nope", path: "/livez", wantCode: 401,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`},
		{name: "certificate outside masters", cert: carol, path: "/api/v1/namespaces/y/configmaps", wantCode: 403,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"carol\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`},
		{name: "token outside masters, named object of a group", token: "bobtoken", path: "/apis/rbac.authorization.k8s.io/v1/clusterroles/admin", wantCode: 403,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"clusterroles.rbac.authorization.k8s.io \"admin\" is forbidden: User \"bob\" cannot get resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope","reason":"Forbidden","details":{"name":"admin","group":"rbac.authorization.k8s.io","kind":"clusterroles"},"code":403}`},
		{name: "non-resource path outside masters", token: "bobtoken", path: "/foo", wantCode: 403,
			wantBody: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"bob\" cannot get path \"/foo\"","reason":"Forbidden","details":{},"code":403}`},
		{name: "health is public", path: "/readyz", wantCode: 200},
		{name: "liveness is public", path: "/livez", wantCode: 200},
		{name: "version is public", path: "/version", wantCode: 200},
		{name: "masters token over the websocket protocol", path: "/api/v1/namespaces/default/configmaps", wantCode: 200, header: http.Header{
			"Connection":             {"Upgrade"},
			"Upgrade":                {"websocket"},
			"Sec-Websocket-Protocol": {"base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("admintoken")) + ", v4.channel.k8s.io"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body, _ := in.get(t, tt.cert, tt.token, tt.path, tt.header)
			if code != tt.wantCode {
				t.Fatalf("code %d, want %d: %s", code, tt.wantCode, body)
			}
			if tt.wantBody != "" && strings.TrimSpace(string(body)) != tt.wantBody {
				t.Errorf("body\n%s\nwant\n%s", body, tt.wantBody)
			}
		})
	}
}

func TestBuiltinGroupsRouteToCore(t *testing.T) {
	in := start(t, 1, nil)
	agg, err := aggregator.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		apiService, path string
		group, version   int32
		// routedOnly marks groups the core under test may not serve
		// yet: their registration is checked, not their answer.
		routedOnly bool
	}{
		{"v1.", "/api/v1", 18000, 1, false},
		{"v1.apiregistration.k8s.io", "/apis/apiregistration.k8s.io/v1", 18000, 15, false},
		{"v1.events.k8s.io", "/apis/events.k8s.io/v1", 17750, 15, false},
		{"v1.authentication.k8s.io", "/apis/authentication.k8s.io/v1", 17700, 15, true},
		{"v1.authorization.k8s.io", "/apis/authorization.k8s.io/v1", 17600, 15, true},
		{"v1.rbac.authorization.k8s.io", "/apis/rbac.authorization.k8s.io/v1", 17000, 15, false},
		{"v1.admissionregistration.k8s.io", "/apis/admissionregistration.k8s.io/v1", 16700, 15, false},
		{"v1.coordination.k8s.io", "/apis/coordination.k8s.io/v1", 16500, 15, false},
	}
	for _, tt := range tests {
		t.Run(tt.apiService, func(t *testing.T) {
			s, err := agg.ApiregistrationV1().APIServices().Get(context.Background(), tt.apiService, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("registered apiservice: %v", err)
			}
			if s.Spec.Service != nil || s.Spec.GroupPriorityMinimum != tt.group || s.Spec.VersionPriority != tt.version {
				t.Errorf("spec %+v, want local with priorities %d/%d", s.Spec, tt.group, tt.version)
			}
			if tt.routedOnly {
				return
			}
			code, body, _ := in.get(t, in.admin, "", tt.path, nil)
			var list metav1.APIResourceList
			if code != 200 || json.Unmarshal(body, &list) != nil || len(list.APIResources) == 0 {
				t.Fatalf("GET %s: %d %s", tt.path, code, body)
			}
			if want := strings.TrimPrefix(strings.TrimPrefix(tt.path, "/apis/"), "/api/"); list.GroupVersion != want {
				t.Errorf("groupVersion %q, want %q", list.GroupVersion, want)
			}
		})
	}
	t.Run("unknown group version", func(t *testing.T) {
		code, body, _ := in.get(t, in.admin, "", "/apis/nothing.example.com/v1/things", nil)
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
		if code != 404 || strings.TrimSpace(string(body)) != want {
			t.Errorf("%d %s, want 404 %s", code, body, want)
		}
	})
}

// TestAggregatedAPIService registers an external group served by a small
// HTTPS server found through the service map: the availability controller
// keeps it unavailable (503) until the server answers its probe, then
// requests reach the server with the caller's identity.
func TestAggregatedAPIService(t *testing.T) {
	seen := make(chan http.Header, 10)
	var up atomic.Bool
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "front-proxy-client" {
			http.Error(w, "no front proxy certificate", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/apis/example.com/v1" && !up.Load() {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		// Only requests for widgets are the test's: the gateway also
		// fetches discovery and OpenAPI documents, which this server
		// does not serve.
		if strings.HasSuffix(r.URL.Path, "/widgets") {
			select {
			case seen <- r.Header.Clone():
			default:
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Warning", `299 - "widgets are experimental"`)
		_, _ = io.WriteString(w, `{"kind":"WidgetList","apiVersion":"example.com/v1","metadata":{},"items":[]}`)
	}))
	var in *installation
	var backendCerts *certs
	in = start(t, 1, func(o *server.Options) {
		o.ServiceMap = []string{"widgets/api=" + "https://" + backend.Listener.Addr().String()}
	})
	backendCerts = in.certs
	in.auth.setPolicy(func(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
		if ra := spec.ResourceAttributes; spec.User == "mallory" && ra != nil && ra.Verb == "list" && ra.Resource == "widgets" {
			return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		}
		return publicPaths(spec)
	})
	cert := backendCerts.servingCert(t, "widgets", []string{"api.widgets.svc"})
	backend.TLS = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert.TLSCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    backendCerts.ca.Pool(),
	}
	backend.StartTLS()
	t.Cleanup(backend.Close)

	agg, err := aggregator.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	port := int32(443)
	svc, err := agg.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "example.com", Version: "v1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "widgets", Name: "api", Port: &port},
			CABundle:             backendCerts.ca.CertPEM(),
			GroupPriorityMinimum: 1000, VersionPriority: 15,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	condition := func() apiregistrationv1.APIServiceCondition {
		t.Helper()
		s, err := agg.ApiregistrationV1().APIServices().Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range s.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				return c
			}
		}
		return apiregistrationv1.APIServiceCondition{}
	}

	path := "/apis/example.com/v1/namespaces/default/widgets"
	t.Run("unavailable", func(t *testing.T) {
		waitFor(t, func() bool { return condition().Status == apiregistrationv1.ConditionFalse })
		c := condition()
		if c.Reason != "FailedDiscoveryCheck" || !strings.Contains(c.Message, "bad status from") || !strings.HasSuffix(c.Message, ": 503") {
			t.Errorf("condition %+v, want FailedDiscoveryCheck with the status", c)
		}
		waitFor(t, func() bool { code, _, _ := in.get(t, in.admin, "", path, nil); return code != 404 })
		code, body, _ := in.get(t, in.admin, "", path, nil)
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"service unavailable","reason":"ServiceUnavailable","code":503}`
		if code != 503 || strings.TrimSpace(string(body)) != want {
			t.Errorf("%d %s, want 503 %s", code, body, want)
		}
	})

	up.Store(true)
	t.Run("available, identity replaced", func(t *testing.T) {
		waitFor(t, func() bool { return condition().Status == apiregistrationv1.ConditionTrue })
		if c := condition(); c.Reason != "Passed" {
			t.Errorf("condition %+v, want Passed", c)
		}
		waitFor(t, func() bool { code, _, _ := in.get(t, in.admin, "", path, nil); return code == 200 })
		for len(seen) > 0 {
			<-seen
		}
		spoof := http.Header{
			"X-Remote-User":                        {"system:admin"},
			"X-Remote-Group":                       {"system:nodes"},
			"X-Remote-Extra-Foo":                   {"bar"},
			"Impersonate-User":                     {"mallory"},
			"Impersonate-Group":                    {"widget-makers"},
			"Impersonate-Uid":                      {"m-1"},
			"Impersonate-Extra-Acme.com%2fproject": {"p1"},
			"Traceparent":                          {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		}
		code, body, header := in.get(t, in.admin, "", path, spoof)
		if code != 200 || !strings.Contains(string(body), "WidgetList") {
			t.Fatalf("%d %s", code, body)
		}
		if got := header.Get("Warning"); got != `299 - "widgets are experimental"` {
			t.Errorf("Warning %q did not pass through", got)
		}
		if got := header.Get("Content-Type"); got != "application/json" {
			t.Errorf("Content-Type %q", got)
		}
		h := <-seen
		// alice, of system:masters, may impersonate anyone; mallory may
		// list widgets.
		if got := h.Values("X-Remote-User"); len(got) != 1 || got[0] != "mallory" {
			t.Errorf("X-Remote-User %q, want [mallory]", got)
		}
		if got := h.Values("X-Remote-Group"); strings.Join(got, ",") != "widget-makers,system:authenticated" {
			t.Errorf("X-Remote-Group %q", got)
		}
		if got := h.Get("X-Remote-Uid"); got != "m-1" {
			t.Errorf("X-Remote-Uid %q, want m-1", got)
		}
		if got := h.Values("X-Remote-Extra-Acme.com%2Fproject"); len(got) != 1 || got[0] != "p1" {
			t.Errorf("X-Remote-Extra-Acme.com%%2Fproject %q, want [p1] (headers %v)", got, h)
		}
		for _, name := range []string{"X-Remote-Extra-Foo", "Impersonate-User", "Impersonate-Group", "Impersonate-Uid", "Impersonate-Extra-Acme.com%2fproject", "Authorization"} {
			if v := h.Values(name); len(v) > 0 {
				t.Errorf("%s %q reached the backend", name, v)
			}
		}
		if got := h.Get("Traceparent"); got != spoof.Get("Traceparent") {
			t.Errorf("traceparent %q did not pass through", got)
		}
	})
}

// TestWatchStreams watches configmaps through the gateway and sees each
// created one arrive while the watch stays open.
func TestWatchStreams(t *testing.T) {
	in := start(t, 1, nil)
	cs, err := kubernetes.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for i := range 3 {
		name := "cm-" + string(rune('a'+i))
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Added || !ok || cm.Name != name {
				t.Fatalf("event %s %#v, want ADDED %s", ev.Type, ev.Object, name)
			}
		case <-ctx.Done():
			t.Fatalf("no event for %s", name)
		}
	}
}

// TestRetryOnAnotherReplica kills one of two core replicas; reads keep
// succeeding through the gateway.
func TestRetryOnAnotherReplica(t *testing.T) {
	in := start(t, 2, nil)
	cs, err := kubernetes.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := in.cores[0].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatalf("get %d after a replica died: %v", i, err)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list %d after a replica died: %v", i, err)
		}
	}
}

// TestBinary builds kplane-gateway, runs it with flags in front of core
// and stops it with SIGTERM.
func TestBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "kplane-gateway")
	if out, err := exec.Command("go", "build", "-o", bin, "kplane.dev/services/gateway/cmd/kplane-gateway").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	etcd := etcdtest.Start(t)
	c := newCerts(t)
	cr := startCore(t, c, etcd)
	o := gatewayOptions(c, natstest.Start(t).URL, cr)
	cmd := exec.Command(bin,
		"--listen-address=127.0.0.1:0",
		"--tls-cert-file="+o.TLSCertFile,
		"--tls-private-key-file="+o.TLSPrivateKeyFile,
		"--client-ca-file="+o.ClientCAFile,
		"--proxy-client-cert-file="+o.ProxyClientCertFile,
		"--proxy-client-key-file="+o.ProxyClientKeyFile,
		"--backend-ca-file="+o.BackendCAFile,
		"--core-url="+cr.URL,
		"--nats-url="+o.NATS.URL,
		"--log-format=json",
	)
	url, wait := serveProcess(t, "kplane-gateway", cmd)
	admin := c.client(t, "alice", "system:masters")
	waitReady(t, c, url+"/api/v1/namespaces/default", admin)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("kplane-gateway still running 20s after SIGTERM")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Until its routing table has synced, a gateway cannot tell an unknown
// group from one it has not loaded yet: it answers 503 with Retry-After,
// which clients retry, rather than a 404 for an object that exists.
func TestUnsyncedGatewayAsksToRetry(t *testing.T) {
	c := newCerts(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadCore := &core{URL: "https://" + ln.Addr().String()}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	o := gatewayOptions(c, natstest.Start(t).URL, deadCore)
	lw := &addrWriter{t: t, addr: make(chan string, 1)}
	cfg, err := o.Config(lw)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	var addr string
	select {
	case addr = <-lw.addr:
	case err := <-done:
		t.Fatalf("gateway stopped before serving: %v", err)
	}
	resp, err := c.httpClient(t, c.client(t, "admin", "system:masters")).Get("https://" + addr + "/api/v1/namespaces/default/configmaps/kept")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("got %d with Retry-After %q, want 503 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestUnregisteredGroupsGoToCRD: a group no APIService names is crd's to
// answer, as kube-aggregator hands it to the apiextensions server, so
// that a CRD's custom resources are served from the moment crd
// establishes it, before its APIService is made (or made again after the
// CRD was deleted and created anew). Without crd it is the gateway's 404
// (TestBuiltinGroupsRouteToCore).
func TestUnregisteredGroupsGoToCRD(t *testing.T) {
	seen := make(chan string, 10)
	crd := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "front-proxy-client" {
			http.Error(w, "no front proxy certificate", http.StatusUnauthorized)
			return
		}
		if !strings.HasPrefix(r.URL.Path, "/apis/nothing.example.com/") {
			// The gateway's own discovery and OpenAPI reads.
			http.NotFound(w, r)
			return
		}
		seen <- r.Header.Get("X-Remote-User") + " " + r.URL.Path
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"ThingList","apiVersion":"nothing.example.com/v1","metadata":{},"items":[]}`)
	}))
	// The stub serves TLS from the start, with the fixture's certificates
	// once start has made them: until then its handshakes fail at once,
	// as those of a crd replica that is not up yet.
	var serving atomic.Pointer[tls.Config]
	crd.TLS = &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		if c := serving.Load(); c != nil {
			return c, nil
		}
		return nil, errors.New("not serving yet")
	}}
	crd.StartTLS()
	t.Cleanup(crd.Close)
	in := start(t, 1, func(o *server.Options) {
		o.CRDURLs = []string{"https://" + crd.Listener.Addr().String()}
	})
	cert := in.certs.servingCert(t, "crd", []string{"127.0.0.1"})
	serving.Store(&tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert.TLSCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    in.certs.ca.Pool(),
	})

	code, body, _ := in.get(t, in.admin, "", "/apis/nothing.example.com/v1/things", nil)
	if code != http.StatusOK || !strings.Contains(string(body), "ThingList") {
		t.Fatalf("GET of a group without an APIService: %d %s, want crd's answer", code, body)
	}
	if got := <-seen; got != "alice /apis/nothing.example.com/v1/things" {
		t.Errorf("crd got %q", got)
	}
}
