package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kplane.dev/libs/apiserver/apitest"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/services/gateway/internal/discovery/backendtest"
	"kplane.dev/services/gateway/internal/routing"
	"kplane.dev/services/gateway/internal/server"
)

// startWidgets runs an aggregated API server of example.com/v1 widgets
// over TLS with a serving certificate for api.widgets.svc, verifying
// clients against the test CA as an aggregated server verifies the front
// proxy. Its address is known before the gateway starts, to go in the
// service map.
func startWidgets(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	return srv
}

// serveWidgets starts srv as the widgets API server of in.
func serveWidgets(t *testing.T, in *installation, srv *httptest.Server) {
	t.Helper()
	opts := apiserver.Options{
		Resources: backendtest.Resources(t, apitest.Widgets),
		Stores:    apiserver.EtcdStores(in.etcd.Client(t), "/widgets", nil),
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatal(err)
	}
	api, err := apiserver.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- api.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("run widgets server: %v", err)
		}
	})
	cert := in.certs.servingCert(t, "widgets", []string{"api.widgets.svc"})
	srv.Config.Handler = api.Handler()
	srv.TLS = &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert.TLSCertificate()},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    in.certs.ca.Pool(),
	}
	srv.StartTLS()
}

// registerWidgets registers example.com/v1; the availability controller
// finds it available.
func registerWidgets(t *testing.T, in *installation) {
	t.Helper()
	agg, err := aggregator.NewForConfig(in.certs.restConfig(t, in.gw.URL, in.admin))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	port := int32(443)
	_, err = agg.ApiregistrationV1().APIServices().Create(ctx, &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com"},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "example.com", Version: "v1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: "widgets", Name: "api", Port: &port},
			CABundle:             in.certs.ca.CertPEM(),
			GroupPriorityMinimum: 1000, VersionPriority: 15,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// discovered is what client-go's discovery finds through the gateway:
// group names and resources by group-version.
func discovered(t *testing.T, dc discovery.DiscoveryInterface) ([]string, map[string][]string, error) {
	t.Helper()
	groups, lists, err := dc.ServerGroupsAndResources()
	var names []string
	for _, g := range groups {
		names = append(names, g.Name)
	}
	resources := map[string][]string{}
	for _, l := range lists {
		for _, r := range l.APIResources {
			resources[l.GroupVersion] = append(resources[l.GroupVersion], r.Name)
		}
	}
	return names, resources, err
}

// TestServedDocuments checks what the gateway serves itself, as kubectl
// reads it: merged discovery (with an aggregated API server's group while
// it is up, without it once it is down), OpenAPI, /version, health and
// metrics.
func TestServedDocuments(t *testing.T) {
	widgets := startWidgets(t)
	in := start(t, 1, func(o *server.Options) {
		o.ServiceMap = []string{"widgets/api=https://" + widgets.Listener.Addr().String()}
		o.DocumentsInterval = 100 * time.Millisecond
	})
	serveWidgets(t, in, widgets)
	registerWidgets(t, in)
	cfg := in.certs.restConfig(t, in.gw.URL, in.admin)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dc := cs.Discovery()

	t.Run("discovery", func(t *testing.T) {
		var (
			groups    []string
			resources map[string][]string
			err       error
		)
		waitFor(t, func() bool {
			groups, resources, err = discovered(t, dc)
			return err == nil && slices.Contains(resources["example.com/v1"], "widgets")
		})
		for _, s := range routing.BuiltinAPIServices(false) {
			// A group core does not serve (yet) is rightly left out.
			if code, _, _ := in.get(t, in.admin, "", "/apis/"+s.Spec.Group+"/"+s.Spec.Version, nil); s.Spec.Group != "" && code != http.StatusOK {
				continue
			}
			if !slices.Contains(groups, s.Spec.Group) {
				t.Errorf("group %q of %s missing from %q", s.Spec.Group, s.Name, groups)
			}
		}
		if got := resources["v1"]; !slices.Contains(got, "namespaces") || !slices.Contains(got, "configmaps") {
			t.Errorf("v1 resources %q lack namespaces or configmaps", got)
		}
		if !slices.Contains(groups, "example.com") {
			t.Errorf("aggregated group example.com missing from %q", groups)
		}
	})

	t.Run("aggregated discovery v2", func(t *testing.T) {
		for _, path := range []string{"/api", "/apis"} {
			code, body, header := in.get(t, in.admin, "", path, http.Header{"Accept": {"application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"}})
			ct := header.Get("Content-Type")
			if code != 200 || !strings.Contains(ct, "g=apidiscovery.k8s.io") || !strings.Contains(ct, "v=v2") || header.Get("ETag") == "" {
				t.Fatalf("GET %s: %d %s %q", path, code, ct, body)
			}
			var list struct {
				Kind  string
				Items []struct{ Metadata struct{ Name string } }
			}
			if err := json.Unmarshal(body, &list); err != nil || list.Kind != "APIGroupDiscoveryList" || len(list.Items) == 0 {
				t.Errorf("GET %s: %v %s", path, err, body)
			}
		}
	})

	t.Run("openapi v3", func(t *testing.T) {
		paths, err := dc.OpenAPIV3().Paths()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"api/v1", "apis/rbac.authorization.k8s.io/v1", "apis/apiregistration.k8s.io/v1"} {
			if _, ok := paths[p]; !ok {
				t.Errorf("openapi v3 index lacks %s", p)
			}
		}
		doc, err := paths["api/v1"].Schema("application/json")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(doc), `"io.k8s.api.core.v1.ConfigMap"`) {
			t.Errorf("api/v1 document has no ConfigMap schema: %.300s", doc)
		}
	})

	t.Run("openapi v2", func(t *testing.T) {
		doc, err := dc.OpenAPISchema()
		if err != nil {
			t.Fatal(err)
		}
		if doc.GetPaths() == nil || len(doc.GetPaths().GetPath()) == 0 {
			t.Error("openapi v2 document has no paths")
		}
	})

	t.Run("version", func(t *testing.T) {
		code, body, header := in.get(t, nil, "", "/version", nil)
		var v struct{ Major, Minor, GitVersion, GoVersion, Platform string }
		if code != 200 || header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &v) != nil {
			t.Fatalf("anonymous GET /version: %d %q %s", code, header.Get("Content-Type"), body)
		}
		if v.Major != "1" || v.Minor == "" || !strings.HasPrefix(v.GitVersion, "v1.") || v.GoVersion == "" || v.Platform == "" {
			t.Errorf("version %+v", v)
		}
		sv, err := dc.ServerVersion()
		if err != nil || sv.GitVersion != v.GitVersion {
			t.Errorf("client-go server version %+v, %v", sv, err)
		}
	})

	t.Run("readyz", func(t *testing.T) {
		want := "[+]ping ok\n[+]log ok\n[+]poststarthook/apiservice-registration-controller ok\n[+]shutdown ok\nreadyz check passed\n"
		code, body, _ := in.get(t, nil, "", "/readyz?verbose", nil)
		if code != 200 || string(body) != want {
			t.Errorf("anonymous GET /readyz?verbose: %d %q, want 200 %q", code, body, want)
		}
		code, body, _ = in.get(t, in.admin, "", "/livez/ping", nil)
		if code != 200 || string(body) != "ok" {
			t.Errorf("GET /livez/ping: %d %q", code, body)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		ctx := context.Background()
		if _, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "nothing-here", metav1.GetOptions{}); err == nil {
			t.Fatal("got a namespace that does not exist")
		}
		code, body, _ := in.get(t, in.admin, "", "/metrics", nil)
		if code != 200 {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		for _, want := range [][]string{
			{`apiserver_request_total{`, `verb="LIST"`, `resource="namespaces"`, `scope="cluster"`, `code="200"`, `component="apiserver"`},
			{`apiserver_request_total{`, `verb="GET"`, `resource="namespaces"`, `scope="resource"`, `code="200"`},
			{`apiserver_request_total{`, `verb="GET"`, `resource="namespaces"`, `code="404"`},
			{`apiserver_request_duration_seconds_bucket{`, `verb="LIST"`, `resource="namespaces"`},
		} {
			if !hasLine(body, want) {
				t.Errorf("no metrics line with all of %q", want)
			}
		}
	})

	t.Run("aggregated server down", func(t *testing.T) {
		widgets.CloseClientConnections()
		widgets.Listener.Close()
		var (
			groups []string
			err    error
		)
		waitFor(t, func() bool {
			groups, _, err = discovered(t, dc)
			return err == nil && !slices.Contains(groups, "example.com")
		})
		if !slices.Contains(groups, "rbac.authorization.k8s.io") {
			t.Errorf("groups %q lack rbac.authorization.k8s.io", groups)
		}
		agg, err := aggregator.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			s, err := agg.ApiregistrationV1().APIServices().Get(context.Background(), "v1.example.com", metav1.GetOptions{})
			return err == nil && len(s.Status.Conditions) == 1 && s.Status.Conditions[0].Status == apiregistrationv1.ConditionFalse &&
				s.Status.Conditions[0].Reason == "FailedDiscoveryCheck"
		})
	})
}

// hasLine reports whether a line of body contains every part.
func hasLine(body []byte, parts []string) bool {
	s := bufio.NewScanner(strings.NewReader(string(body)))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(s.Text(), p) }) {
			return true
		}
	}
	return false
}

// TestMaxInFlight holds the one mutating slot with a create whose body
// has not arrived: another caller allowed to write gets kube's 429,
// system:masters still gets through, and the held request completes.
func TestMaxInFlight(t *testing.T) {
	in := start(t, 1, func(o *server.Options) {
		o.Filters.MaxMutatingRequestsInFlight = 1
	})
	in.auth.setPolicy(allowWrites)
	client := in.certs.httpClient(t, in.admin)
	defer client.CloseIdleConnections()
	body, send := io.Pipe()
	req, err := http.NewRequest(http.MethodPost, in.gw.URL+"/api/v1/namespaces/default/configmaps", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	held := make(chan *http.Response, 1)
	heldErr := make(chan error, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			heldErr <- err
			return
		}
		held <- resp
	}()
	waitFor(t, func() bool {
		_, metrics, _ := in.get(t, in.admin, "", "/metrics", nil)
		return hasLine(metrics, []string{`apiserver_current_inflight_requests{request_kind="mutating"} 1`})
	})

	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"over"}}`
	post := func(cert bool, token string) *http.Response {
		t.Helper()
		c := in.certs.httpClient(t, nil)
		if cert {
			c = in.certs.httpClient(t, in.admin)
		}
		defer c.CloseIdleConnections()
		r, err := http.NewRequest(http.MethodPost, in.gw.URL+"/api/v1/namespaces/default/configmaps", strings.NewReader(cm))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Content-Type", "application/json")
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(strings.NewReader(string(b)))
		return resp
	}
	t.Run("over the limit", func(t *testing.T) {
		resp := post(false, "bobtoken")
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
			strings.TrimSpace(string(b)) != "Too many requests, please try again later." {
			t.Errorf("%d Retry-After %q %q, want 429 with Retry-After 1", resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	})
	t.Run("system:masters beyond the limit", func(t *testing.T) {
		resp := post(true, "")
		if resp.StatusCode != http.StatusCreated {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("%d %s, want 201", resp.StatusCode, b)
		}
	})
	t.Run("held request completes", func(t *testing.T) {
		if _, err := io.WriteString(send, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"held"}}`); err != nil {
			t.Fatal(err)
		}
		if err := send.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case resp := <-held:
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Errorf("%d %s, want 201", resp.StatusCode, b)
			}
		case err := <-heldErr:
			t.Fatal(err)
		}
	})
}

// TestGracefulShutdown stops a gateway with a shutdown delay: during the
// delay /readyz fails on its shutdown check while requests are still
// served, then an open watch ends cleanly and Run returns nil.
func TestGracefulShutdown(t *testing.T) {
	in := start(t, 1, func(o *server.Options) {
		o.Filters.ShutdownDelay = 5 * time.Second
	})
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
	stopped := make(chan error, 1)
	go func() { stopped <- in.gw.Stop() }()

	t.Run("unready during the delay", func(t *testing.T) {
		var code int
		var body []byte
		waitFor(t, func() bool {
			code, body, _ = in.get(t, nil, "", "/readyz?verbose", nil)
			return code != http.StatusOK
		})
		if code != http.StatusInternalServerError || !strings.Contains(string(body), "[-]shutdown failed: reason withheld\n") ||
			!strings.HasSuffix(string(body), "readyz check failed\n") {
			t.Errorf("%d %q, want 500 with the shutdown check failed", code, body)
		}
		if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "during-delay"}}, metav1.CreateOptions{}); err != nil {
			t.Errorf("create during the shutdown delay: %v", err)
		}
	})
	t.Run("watch ends cleanly", func(t *testing.T) {
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Error {
					t.Fatalf("watch ended with an error event: %#v", ev.Object)
				}
			case <-ctx.Done():
				t.Fatal("watch still open")
			}
		}
	})
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("run: %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("gateway did not stop")
	}
	if _, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{}); err == nil {
		t.Errorf("get after shutdown: %v, want a refused connection", err)
	}
}
