package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/pki"
	"kplane.dev/test/e2e/harness"
)

// Bodies kube-apiserver answers word for word.
const (
	noRouteBody      = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
	unauthorizedBody = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}`
)

// The aggregated API the tenant test registers, served by the test.
const (
	aggGroup   = "forged.example.com"
	aggVersion = "v1"
)

// forgedRemote are the front proxy headers a hostile client adds to speak
// for someone else; the gateway must drop them.
var forgedRemote = http.Header{
	"X-Remote-User":         {"kplane-admin"},
	"X-Remote-Group":        {"system:masters"},
	"X-Remote-Extra-Forged": {"yes"},
	"X-Remote-Uid":          {"forged-uid"},
}

// forged adds impersonation, which the gateway authorizes (and refuses
// the tenant) before anything else.
var forged = merge(forgedRemote, http.Header{
	"Impersonate-User":         {"kplane-admin"},
	"Impersonate-Group":        {"system:masters"},
	"Impersonate-Extra-Forged": {"yes"},
})

// TestIdentityAndPathShapes runs, as a tenant holding only namespaced
// grants, path shapes kube has no route for (kube's exact 404 body), every
// spelling of ?watch, and forged identity headers on every kind of
// request through the gateway as make up runs it, down to the headers an
// external aggregated API server receives; and calls core straight
// without the gateway's certificate. test/security attacks the same
// holes by their refusals; this test pins what gets through.
func TestIdentityAndPathShapes(t *testing.T) {
	agg := newAggregatedBackend(t)
	sys := harness.Start(t, harness.WithArgs("gateway", "--service-map=e2e-agg/forged="+agg.srv.URL))
	admin, err := kubernetes.NewForConfig(sys.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const mine, other = "e2e-tenant-mine", "e2e-tenant-other"
	createNamespace(t, sys, mine)
	createNamespace(t, sys, other)
	mustKubectl(t, sys, "-n", other, "create", "configmap", "secret-plans", "--from-literal=k=v")
	mustKubectl(t, sys, "-n", mine, "create", "serviceaccount", "tenant")
	mustKubectl(t, sys, "-n", mine, "create", "serviceaccount", "lister")
	tenantToken := strings.TrimSpace(mustKubectl(t, sys, "-n", mine, "create", "token", "tenant"))
	listerToken := strings.TrimSpace(mustKubectl(t, sys, "-n", mine, "create", "token", "lister"))
	tenant := "system:serviceaccount:" + mine + ":tenant"

	// The tenant holds view and edit in its namespace, every verb on
	// namespaces there and reads of the aggregated API, all through
	// RoleBindings; lister may only list configmaps there.
	roles := []*rbacv1.Role{
		{ObjectMeta: metav1.ObjectMeta{Name: "namespaces", Namespace: mine}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status"}, Verbs: []string{"get", "list", "watch", "update", "patch", "delete", "create"}},
			{APIGroups: []string{aggGroup}, Resources: []string{"things"}, Verbs: []string{"get", "list"}},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "list-only", Namespace: mine}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}},
		}},
	}
	for _, r := range roles {
		if _, err := admin.RbacV1().Roles(mine).Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind := func(name, kind, role, sa string) {
		t.Helper()
		rb := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mine},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: mine}},
		}
		if _, err := admin.RbacV1().RoleBindings(mine).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("tenant-view", "ClusterRole", "view", "tenant")
	bind("tenant-edit", "ClusterRole", "edit", "tenant")
	bind("tenant-namespaces", "Role", "namespaces", "tenant")
	bind("lister", "Role", "list-only", "lister")

	gw := newRawClient(t, sys.URL(), sys.CAFile(), nil)
	// The grants are in place once authz has them: the tenant reads its
	// own namespace object, kube's way of naming it (/namespaces/<name>).
	eventuallyKubectl(t, 30*time.Second, func() error {
		return gw.expect(http.MethodGet, "/api/v1/namespaces/"+mine, tenantToken, nil, "", http.StatusOK)
	})
	eventuallyKubectl(t, 30*time.Second, func() error {
		return gw.expect(http.MethodGet, "/api/v1/namespaces/"+mine+"/configmaps?watch=false", listerToken, nil, "", http.StatusOK)
	})

	t.Run("cluster-scoped resource under a namespace", func(t *testing.T) {
		patch := `{"metadata":{"labels":{"taken":"yes"}}}`
		ns := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + other + `","labels":{"taken":"yes"}}}`
		for _, tc := range []struct{ method, path, body string }{
			{http.MethodGet, "/api/v1/namespaces/" + mine + "/namespaces", ""},
			{http.MethodGet, "/api/v1/namespaces/" + mine + "/namespaces?watch=true", ""},
			{http.MethodGet, "/api/v1/watch/namespaces/" + mine + "/namespaces", ""},
			{http.MethodGet, "/api/v1/namespaces/" + mine + "/namespaces/" + other, ""},
			{http.MethodGet, "/api/v1/namespaces/" + mine + "/namespaces/" + mine, ""},
			{http.MethodPut, "/api/v1/namespaces/" + mine + "/namespaces/" + other, ns},
			{http.MethodPatch, "/api/v1/namespaces/" + mine + "/namespaces/" + other, patch},
			{http.MethodDelete, "/api/v1/namespaces/" + mine + "/namespaces/" + other, ""},
			{http.MethodPut, "/api/v1/namespaces/" + mine + "/namespaces/" + other + "/status", ns},
		} {
			code, body := gw.do(t, tc.method, tc.path, tenantToken, nil, tc.body)
			if code != http.StatusNotFound || strings.TrimSpace(body) != noRouteBody {
				t.Errorf("%s %s: %d %s, want kube's 404", tc.method, tc.path, code, body)
			}
		}
		got, err := admin.CoreV1().Namespaces().Get(ctx, other, metav1.GetOptions{})
		if err != nil || got.Labels["taken"] != "" || got.DeletionTimestamp != nil {
			t.Errorf("namespace %s after the attack: %+v, %v", other, got, err)
		}
	})

	t.Run("list-only user cannot watch", func(t *testing.T) {
		path := "/api/v1/namespaces/" + mine + "/configmaps?"
		for _, q := range []string{"watch=yes", "watch=1", "watch=true", "watch=TRUE", "watch=t", "watch=f", "watch"} {
			code, body := gw.do(t, http.MethodGet, path+q, listerToken, nil, "")
			want := `cannot watch resource \"configmaps\"`
			if code != http.StatusForbidden || !strings.Contains(body, want) {
				t.Errorf("?%s: %d %s, want 403 for watch", q, code, body)
			}
		}
		for _, q := range []string{"watch=false", "watch=FALSE", "watch=0"} {
			code, body := gw.do(t, http.MethodGet, path+q, listerToken, nil, "")
			if code != http.StatusOK || !strings.Contains(body, `"kind":"ConfigMapList"`) {
				t.Errorf("?%s: %d %s, want the list", q, code, body)
			}
		}
	})

	t.Run("forged identity headers", func(t *testing.T) {
		forbiddenAsTenant := `User \"` + tenant + `\" cannot`
		for _, tc := range []struct {
			name, method, path string
			extra              http.Header
		}{
			{"get", http.MethodGet, "/api/v1/namespaces/" + other + "/configmaps/secret-plans", nil},
			{"list", http.MethodGet, "/api/v1/namespaces/" + other + "/configmaps", nil},
			{"watch", http.MethodGet, "/api/v1/namespaces/" + other + "/configmaps?watch=true", nil},
			{"legacy watch", http.MethodGet, "/api/v1/watch/namespaces/" + other + "/configmaps", nil},
			{"websocket watch", http.MethodGet, "/api/v1/namespaces/" + other + "/configmaps?watch=true", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}},
			{"delete", http.MethodDelete, "/api/v1/namespaces/" + other + "/configmaps/secret-plans", nil},
			{"cluster-wide list", http.MethodGet, "/api/v1/secrets", nil},
		} {
			code, body := gw.do(t, tc.method, tc.path, tenantToken, merge(forged, tc.extra), "")
			if code != http.StatusForbidden || !strings.Contains(body, forbiddenAsTenant) {
				t.Errorf("%s with forged headers: %d %s, want 403 as %s", tc.name, code, body, tenant)
			}
		}
		// Without any credential the forged headers leave the caller
		// anonymous, which may not read discovery or OpenAPI.
		for _, path := range []string{"/api", "/apis", "/api/v1", "/openapi/v2", "/openapi/v3", "/apis/" + aggGroup + "/" + aggVersion} {
			code, body := gw.do(t, http.MethodGet, path, "", forged, "")
			if code != http.StatusForbidden || !strings.Contains(body, `User \"system:anonymous\" cannot`) {
				t.Errorf("anonymous GET %s with forged headers: %d %s, want 403 as system:anonymous", path, code, body)
			}
		}
		// What core sees: the tenant, nothing forged.
		code, body := gw.do(t, http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", tenantToken, forgedRemote,
			`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
		var review struct {
			Status struct {
				UserInfo struct {
					Username string              `json:"username"`
					UID      string              `json:"uid"`
					Groups   []string            `json:"groups"`
					Extra    map[string][]string `json:"extra"`
				} `json:"userInfo"`
			} `json:"status"`
		}
		if err := json.Unmarshal([]byte(body), &review); code != http.StatusCreated || err != nil {
			t.Fatalf("selfsubjectreview with forged headers: %d %s (%v)", code, body, err)
		}
		u := review.Status.UserInfo
		if u.Username != tenant || slices.Contains(u.Groups, "system:masters") || u.UID == "forged-uid" || u.Extra["forged"] != nil {
			t.Errorf("core saw %+v with forged headers, want %s and nothing forged", u, tenant)
		}
	})

	t.Run("aggregated API gets the gateway's identity only", func(t *testing.T) {
		apiService := `{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"` + aggVersion + "." + aggGroup + `"},` +
			`"spec":{"group":"` + aggGroup + `","version":"` + aggVersion + `","groupPriorityMinimum":1000,"versionPriority":15,` +
			`"service":{"namespace":"e2e-agg","name":"forged","port":443},"insecureSkipTLSVerify":true}}`
		file := filepath.Join(t.TempDir(), "apiservice.json")
		if err := os.WriteFile(file, []byte(apiService), 0o600); err != nil {
			t.Fatal(err)
		}
		mustKubectl(t, sys, "apply", "-f", file)
		path := "/apis/" + aggGroup + "/" + aggVersion + "/namespaces/" + mine + "/things"
		eventuallyKubectl(t, 30*time.Second, func() error {
			return gw.expect(http.MethodGet, path, tenantToken, forgedRemote, "", http.StatusOK)
		})
		agg.reset()
		if code, body := gw.do(t, http.MethodGet, path, tenantToken, forged, ""); code != http.StatusForbidden || agg.last(path) != nil {
			t.Errorf("impersonating through the aggregated route: %d %s, want 403 before the backend", code, body)
		}
		for _, extra := range []http.Header{nil, {"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}} {
			agg.reset()
			if code, body := gw.do(t, http.MethodGet, path, tenantToken, merge(forgedRemote, extra), ""); code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, code, body)
			}
			h := agg.last(path)
			if h == nil {
				t.Fatalf("the aggregated server saw no request for %s", path)
			}
			if got := h.Values("X-Remote-User"); len(got) != 1 || got[0] != tenant {
				t.Errorf("X-Remote-User = %q, want %s", got, tenant)
			}
			if groups := h.Values("X-Remote-Group"); slices.Contains(groups, "system:masters") || !slices.Contains(groups, "system:authenticated") {
				t.Errorf("X-Remote-Group = %q", groups)
			}
			for name := range h {
				lower := strings.ToLower(name)
				if strings.HasPrefix(lower, "impersonate-") || lower == "authorization" || lower == "x-remote-extra-forged" || (lower == "x-remote-uid" && h.Get(name) == "forged-uid") {
					t.Errorf("the aggregated server got %s: %q", name, h.Values(name))
				}
			}
		}
	})

	t.Run("core refuses callers without the gateway's certificate", func(t *testing.T) {
		pkiDir := filepath.Join(sys.DataDir, "pki")
		adminCert, err := tls.LoadX509KeyPair(filepath.Join(pkiDir, "admin.crt"), filepath.Join(pkiDir, "admin.key"))
		if err != nil {
			t.Fatal(err)
		}
		otherCA, err := pki.NewCA("other-ca", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		impostor, err := otherCA.Client("front-proxy-client", nil, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		coreURL := "https://127.0.0.1:" + strconv.Itoa(sys.Ports["core"])
		for name, cert := range map[string]*tls.Certificate{
			"no certificate":                   nil,
			"the cluster CA's, another CN":     &adminCert,
			"the gateway's CN from another CA": ptr(impostor.TLSCertificate()),
		} {
			c := newRawClient(t, coreURL, sys.CAFile(), cert)
			for _, path := range []string{"/api/v1/namespaces/" + other + "/configmaps", "/api/v1/namespaces", "/api"} {
				code, body := c.do(t, http.MethodGet, path, "", forged, "")
				if code != http.StatusUnauthorized || strings.TrimSpace(body) != unauthorizedBody {
					t.Errorf("%s: GET %s straight to core: %d %s, want kube's 401", name, path, code, body)
				}
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

// merge is a copy of a with b's headers added.
func merge(a, b http.Header) http.Header {
	out := a.Clone()
	for k, vs := range b {
		out[k] = append(out[k], vs...)
	}
	return out
}

// rawClient sends requests as written, headers and all, to one server.
type rawClient struct {
	base string
	c    *http.Client
}

func newRawClient(t *testing.T, base, caFile string, cert *tls.Certificate) *rawClient {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &rawClient{base: base, c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *rawClient) send(method, path, token string, h http.Header, body string) (int, string, error) {
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = h.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	switch method {
	case http.MethodPatch:
		req.Header.Set("Content-Type", "application/merge-patch+json")
	case http.MethodPut, http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), err
}

func (c *rawClient) do(t *testing.T, method, path, token string, h http.Header, body string) (int, string) {
	t.Helper()
	code, out, err := c.send(method, path, token, h, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return code, out
}

// expect is nil when the request answers want, for eventuallyKubectl.
func (c *rawClient) expect(method, path, token string, h http.Header, body string, want int) error {
	code, out, err := c.send(method, path, token, h, body)
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s %s: %d %s, want %d", method, path, code, out, want)
	}
	return nil
}

// aggregatedBackend is an external aggregated API server over HTTPS that
// records the headers of every request it gets.
type aggregatedBackend struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]http.Header
}

func newAggregatedBackend(t *testing.T) *aggregatedBackend {
	t.Helper()
	b := &aggregatedBackend{seen: map[string]http.Header{}}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen[r.URL.Path] = r.Header.Clone()
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/apis/"+aggGroup+"/"+aggVersion {
			_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: aggGroup + "/" + aggVersion,
				APIResources: []metav1.APIResource{{Name: "things", Namespaced: true, Kind: "Thing", Verbs: metav1.Verbs{"get", "list"}}},
			})
			return
		}
		_ = json.NewEncoder(w).Encode(corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ThingList", APIVersion: aggGroup + "/" + aggVersion}})
	}))
	b.srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12}
	b.srv.StartTLS()
	t.Cleanup(b.srv.Close)
	return b
}

func (b *aggregatedBackend) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = map[string]http.Header{}
}

func (b *aggregatedBackend) last(path string) http.Header {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[path]
}
