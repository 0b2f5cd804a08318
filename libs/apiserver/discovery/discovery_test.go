package discovery_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/apistatus"
	kdiscovery "kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/apiserver/resource"
)

// namespaces is a typed built-in resource with a status subresource.
func namespaces() *resource.Resource {
	return &resource.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		Kind:                 "Namespace",
		Singular:             "namespace",
		ShortNames:           []string{"ns"},
		Verbs:                []string{"create", "delete", "get", "list", "patch", "update", "watch"},
		Subresources:         resource.Subresources{Status: true, Finalize: true},
	}
}

func configMaps() *resource.Resource {
	return &resource.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Kind:                 "ConfigMap",
		Singular:             "configmap",
		Namespaced:           true,
		ShortNames:           []string{"cm"},
	}
}

// widgets is a custom resource served as unstructured objects, in two
// versions.
func widgets(version string) *resource.Resource {
	return &resource.Resource{
		GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: version, Resource: "widgets"},
		Kind:                 "Widget",
		Singular:             "widget",
		Namespaced:           true,
		ShortNames:           []string{"wd"},
		Categories:           []string{"all"},
		Subresources:         resource.Subresources{Status: true},
	}
}

// server serves a Set over real HTTP and records the paths requested.
type server struct {
	*httptest.Server
	set *kdiscovery.Set

	mu    sync.Mutex
	paths []string
}

func newServer(t testing.TB, resources ...*resource.Resource) *server {
	t.Helper()
	set, err := kdiscovery.NewSet(resources)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{set: set}
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			s.mu.Lock()
			s.paths = append(s.paths, c.Request().URL.Path)
			s.mu.Unlock()
			return next(c)
		}
	})
	set.Register(e)
	s.Server = httptest.NewServer(e)
	t.Cleanup(s.Close)
	return s
}

func (s *server) requested() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.paths)
}

func get(t *testing.T, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func TestLegacyDocuments(t *testing.T) {
	// v1beta1 widgets are stored as v1, as a CRD's served versions are
	// stored in its storage version: their hash names v1.
	beta := widgets("v1beta1")
	beta.StorageVersion = "v1"
	srv := newServer(t, namespaces(), beta, configMaps(), widgets("v1"))
	v1 := metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1", Version: "v1"}
	v1beta1 := metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1beta1", Version: "v1beta1"}
	group := metav1.APIGroup{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{v1, v1beta1}, PreferredVersion: v1}
	widgetResources := func(version string) metav1.APIResourceList {
		gv := "example.com/" + version
		return metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: gv,
			APIResources: []metav1.APIResource{
				{Name: "widgets", SingularName: "widget", Namespaced: true, Kind: "Widget", Verbs: resource.AllVerbs, ShortNames: []string{"wd"}, Categories: []string{"all"}, StorageVersionHash: kdiscovery.StorageVersionHash("example.com", "v1", "Widget")},
				{Name: "widgets/status", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "patch", "update"}},
			},
		}
	}

	tests := []struct {
		path string
		got  any
		want any
	}{
		{"/api", &metav1.APIVersions{}, &metav1.APIVersions{
			TypeMeta:                   metav1.TypeMeta{Kind: "APIVersions"},
			Versions:                   []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: srv.Listener.Addr().String()}},
		}},
		{"/apis", &metav1.APIGroupList{}, &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   []metav1.APIGroup{group},
		}},
		{"/apis/example.com", &metav1.APIGroup{}, func() *metav1.APIGroup {
			g := group
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			return &g
		}()},
		{"/api/v1", &metav1.APIResourceList{}, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList"},
			GroupVersion: "v1",
			APIResources: []metav1.APIResource{
				{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: resource.AllVerbs, ShortNames: []string{"cm"}, StorageVersionHash: kdiscovery.StorageVersionHash("", "v1", "ConfigMap")},
				{Name: "namespaces", SingularName: "namespace", Kind: "Namespace", Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}, ShortNames: []string{"ns"}, StorageVersionHash: kdiscovery.StorageVersionHash("", "v1", "Namespace")},
				{Name: "namespaces/finalize", Kind: "Namespace", Verbs: []string{"update"}},
				{Name: "namespaces/status", Kind: "Namespace", Verbs: []string{"get", "patch", "update"}},
			},
		}},
		{"/apis/example.com/v1", &metav1.APIResourceList{}, func() *metav1.APIResourceList { l := widgetResources("v1"); return &l }()},
		{"/apis/example.com/v1beta1", &metav1.APIResourceList{}, func() *metav1.APIResourceList { l := widgetResources("v1beta1"); return &l }()},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := get(t, srv.URL+tt.path, http.Header{"Accept": {"application/json, */*"}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if err := json.Unmarshal(body, tt.got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Fatalf("document (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStorageVersionHashMatchesKube(t *testing.T) {
	// Published by kube-apiserver 1.3x for configmaps and deployments.
	tests := []struct{ group, version, kind, want string }{
		{"", "v1", "ConfigMap", "qFsyl6wFWjQ="},
		{"apps", "v1", "Deployment", "8aSe+NMegvE="},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			if got := kdiscovery.StorageVersionHash(tt.group, tt.version, tt.kind); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAggregatedDocuments(t *testing.T) {
	srv := newServer(t, namespaces(), widgets("v1beta1"), widgets("v1"))
	widgetKind := func(v string) *metav1.GroupVersionKind {
		return &metav1.GroupVersionKind{Group: "example.com", Version: v, Kind: "Widget"}
	}
	widgetVersion := func(v string) apidiscoveryv2.APIVersionDiscovery {
		return apidiscoveryv2.APIVersionDiscovery{
			Version: v,
			Resources: []apidiscoveryv2.APIResourceDiscovery{{
				Resource: "widgets", ResponseKind: widgetKind(v), Scope: apidiscoveryv2.ScopeNamespace, SingularResource: "widget",
				Verbs: resource.AllVerbs, ShortNames: []string{"wd"}, Categories: []string{"all"},
				Subresources: []apidiscoveryv2.APISubresourceDiscovery{{Subresource: "status", ResponseKind: widgetKind(v), Verbs: []string{"get", "patch", "update"}}},
			}},
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		}
	}
	nsKind := &metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	tests := []struct {
		path string
		want []apidiscoveryv2.APIGroupDiscovery
	}{
		{"/api", []apidiscoveryv2.APIGroupDiscovery{{Versions: []apidiscoveryv2.APIVersionDiscovery{{
			Version: "v1",
			Resources: []apidiscoveryv2.APIResourceDiscovery{{
				Resource: "namespaces", ResponseKind: nsKind, Scope: apidiscoveryv2.ScopeCluster, SingularResource: "namespace",
				Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}, ShortNames: []string{"ns"},
				Subresources: []apidiscoveryv2.APISubresourceDiscovery{
					{Subresource: "finalize", ResponseKind: nsKind, Verbs: []string{"update"}},
					{Subresource: "status", ResponseKind: nsKind, Verbs: []string{"get", "patch", "update"}},
				},
			}},
			Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		}}}}},
		{"/apis", []apidiscoveryv2.APIGroupDiscovery{{
			ObjectMeta: metav1.ObjectMeta{Name: "example.com"},
			Versions:   []apidiscoveryv2.APIVersionDiscovery{widgetVersion("v1"), widgetVersion("v1beta1")},
		}}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := get(t, srv.URL+tt.path, http.Header{"Accept": {kdiscovery.MediaTypeV2 + ",application/json"}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != kdiscovery.MediaTypeV2 {
				t.Fatalf("Content-Type %q", ct)
			}
			var got apidiscoveryv2.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			want := apidiscoveryv2.APIGroupDiscoveryList{
				TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"},
				Items:    tt.want,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("document (-want +got):\n%s", diff)
			}

			etag := resp.Header.Get("ETag")
			if len(etag) < 3 || etag[0] != '"' {
				t.Fatalf("ETag %q is not a quoted hash", etag)
			}
			resp, body = get(t, srv.URL+tt.path, http.Header{"Accept": {kdiscovery.MediaTypeV2}, "If-None-Match": {etag}})
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Fatalf("with If-None-Match: status %d, %d bytes", resp.StatusCode, len(body))
			}
			resp, _ = get(t, srv.URL+tt.path, http.Header{"Accept": {kdiscovery.MediaTypeV2}, "If-None-Match": {`"stale"`}})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("with a stale If-None-Match: status %d", resp.StatusCode)
			}

			resp, body = get(t, srv.URL+tt.path, http.Header{"Accept": {kdiscovery.MediaTypeV2Beta1}})
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != kdiscovery.MediaTypeV2Beta1 {
				t.Fatalf("v2beta1: status %d, Content-Type %q", resp.StatusCode, ct)
			}
			var beta apidiscoveryv2beta1.APIGroupDiscoveryList
			if err := json.Unmarshal(body, &beta); err != nil {
				t.Fatal(err)
			}
			if beta.APIVersion != "apidiscovery.k8s.io/v2beta1" || len(beta.Items) != len(tt.want) {
				t.Fatalf("v2beta1 document: %s", body)
			}
		})
	}
}

func TestNegotiation(t *testing.T) {
	srv := newServer(t, namespaces(), widgets("v1"))
	tests := []struct {
		name, path, accept string
		wantStatus         int
		wantType           string
	}{
		{"no Accept is legacy", "/apis", "", http.StatusOK, "application/json"},
		{"wildcard is legacy", "/apis", "*/*", http.StatusOK, "application/json"},
		{"preferred legacy", "/apis", "application/json;q=1," + kdiscovery.MediaTypeV2 + ";q=0.5", http.StatusOK, "application/json"},
		{"aggregated preferred", "/api", kdiscovery.MediaTypeV2 + ",application/json;q=0.9", http.StatusOK, kdiscovery.MediaTypeV2},
		{"protobuf aggregated falls back to json", "/apis", "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", http.StatusOK, "application/json"},
		{"protobuf only", "/apis", "application/vnd.kubernetes.protobuf", http.StatusNotAcceptable, "application/json"},
		{"unknown aggregated version", "/apis", "application/json;g=apidiscovery.k8s.io;v=v9;as=APIGroupDiscoveryList", http.StatusNotAcceptable, "application/json"},
		{"aggregated only on /api and /apis", "/apis/example.com", kdiscovery.MediaTypeV2, http.StatusNotAcceptable, "application/json"},
		{"unknown group", "/apis/other.io", "", http.StatusNotFound, "application/json"},
		{"unknown version", "/apis/example.com/v2", "", http.StatusNotFound, "application/json"},
		{"unknown core version", "/api/v2", "", http.StatusNotFound, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.accept != "" {
				h.Set("Accept", tt.accept)
			}
			resp, body := get(t, srv.URL+tt.path, h)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.wantStatus, body)
			}
			if ct := resp.Header.Get("Content-Type"); ct != tt.wantType {
				t.Fatalf("Content-Type %q, want %q", ct, tt.wantType)
			}
			if tt.wantStatus == http.StatusOK {
				return
			}
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Code != int32(tt.wantStatus) {
				t.Fatalf("error body is not a Status with code %d: %s", tt.wantStatus, body)
			}
		})
	}
}

func TestReplace(t *testing.T) {
	srv := newServer(t, namespaces())
	aggregatedETag := func() string {
		resp, _ := get(t, srv.URL+"/apis", http.Header{"Accept": {kdiscovery.MediaTypeV2}})
		return resp.Header.Get("ETag")
	}
	before := aggregatedETag()
	if resp, _ := get(t, srv.URL+"/apis/example.com/v1", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("before Replace: status %d", resp.StatusCode)
	}

	if err := srv.set.Replace([]*resource.Resource{namespaces(), widgets("v1")}); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, srv.URL+"/apis/example.com/v1", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("after adding widgets: status %d: %s", resp.StatusCode, body)
	}
	added := aggregatedETag()
	if added == before {
		t.Fatal("ETag did not change when a group appeared")
	}

	if err := srv.set.Replace([]*resource.Resource{namespaces()}); err != nil {
		t.Fatal(err)
	}
	if resp, _ := get(t, srv.URL+"/apis/example.com/v1", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("after removing widgets: status %d", resp.StatusCode)
	}
	if got := aggregatedETag(); got != before {
		t.Fatalf("ETag %s after removing widgets, want the original %s", got, before)
	}
}

// An unlisted resource (a CRD not established yet) is in the aggregated
// document and the group's versions but not in its version's resource
// list, and listing it changes the aggregated ETag though the aggregated
// document stays the same: the gateway learns of the change from that
// ETag.
func TestUnlisted(t *testing.T) {
	pending := widgets("v1")
	pending.Unlisted = true
	srv := newServer(t, namespaces(), pending)
	aggregated := func() (string, []byte) {
		resp, body := get(t, srv.URL+"/apis", http.Header{"Accept": {kdiscovery.MediaTypeV2}})
		return resp.Header.Get("ETag"), body
	}
	resources := func() []string {
		resp, body := get(t, srv.URL+"/apis/example.com/v1", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("resource list: status %d: %s", resp.StatusCode, body)
		}
		var rl metav1.APIResourceList
		if err := json.Unmarshal(body, &rl); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rl.APIResources {
			names = append(names, r.Name)
		}
		return names
	}

	etag, doc := aggregated()
	if !strings.Contains(string(doc), `"resource":"widgets"`) {
		t.Fatalf("the aggregated document leaves the unlisted widgets out: %s", doc)
	}
	if got := resources(); len(got) != 0 {
		t.Fatalf("resource list of an unlisted resource: %v, want none", got)
	}
	if resp, body := get(t, srv.URL+"/apis/example.com", nil); resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"example.com/v1"`) {
		t.Fatalf("group document: status %d: %s", resp.StatusCode, body)
	}

	if err := srv.set.Replace([]*resource.Resource{namespaces(), widgets("v1")}); err != nil {
		t.Fatal(err)
	}
	listedETag, listedDoc := aggregated()
	if string(listedDoc) != string(doc) {
		t.Fatalf("the aggregated document changed when widgets were listed:\n%s\n%s", doc, listedDoc)
	}
	if listedETag == etag {
		t.Fatal("the aggregated ETag did not change when widgets were listed")
	}
	if got := resources(); !slices.Equal(got, []string{"widgets", "widgets/status"}) {
		t.Fatalf("resource list once listed: %v", got)
	}
}

// Concurrent readers and replacements: the race detector checks the swap.
func TestReplaceWhileServing(t *testing.T) {
	srv := newServer(t, namespaces())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				resp, _ := get(t, srv.URL+"/apis", http.Header{"Accept": {kdiscovery.MediaTypeV2}})
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	for i := range 20 {
		set := []*resource.Resource{namespaces()}
		if i%2 == 0 {
			set = append(set, widgets("v1"))
		}
		if err := srv.set.Replace(set); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestClientGo(t *testing.T) {
	resources := []*resource.Resource{namespaces(), configMaps(), widgets("v1beta1"), widgets("v1")}
	want := map[string][]string{
		"v1":                  {"configmaps", "namespaces", "namespaces/finalize", "namespaces/status"},
		"example.com/v1":      {"widgets", "widgets/status"},
		"example.com/v1beta1": {"widgets", "widgets/status"},
	}
	tests := []struct {
		name   string
		client func(*discovery.DiscoveryClient) discovery.DiscoveryInterface
		// wantPaths are the only paths the client may request.
		wantPaths []string
	}{
		{"aggregated", func(c *discovery.DiscoveryClient) discovery.DiscoveryInterface { return c }, []string{"/api", "/apis"}},
		{"legacy", (*discovery.DiscoveryClient).WithLegacy, []string{"/api", "/apis", "/api/v1", "/apis/example.com/v1", "/apis/example.com/v1beta1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t, resources...)
			dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			groups, lists, err := tt.client(dc).ServerGroupsAndResources()
			if err != nil {
				t.Fatalf("ServerGroupsAndResources: %v", err)
			}
			var names []string
			for _, g := range groups {
				names = append(names, g.Name+"@"+g.PreferredVersion.Version)
			}
			if diff := cmp.Diff([]string{"@v1", "example.com@v1"}, names); diff != "" {
				t.Fatalf("groups (-want +got):\n%s", diff)
			}
			got := map[string][]string{}
			for _, l := range lists {
				for _, r := range l.APIResources {
					got[l.GroupVersion] = append(got[l.GroupVersion], r.Name)
					if r.Name == "widgets" && (r.SingularName != "widget" || !r.Namespaced || r.Kind != "Widget" || !slices.Equal(r.ShortNames, []string{"wd"}) || !slices.Equal(r.Categories, []string{"all"})) {
						t.Errorf("widgets in %s: %+v", l.GroupVersion, r)
					}
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("resources (-want +got):\n%s", diff)
			}
			for _, p := range srv.requested() {
				if !slices.Contains(tt.wantPaths, p) {
					t.Fatalf("client requested %s; want only %v", p, tt.wantPaths)
				}
			}
		})
	}
}

// TestActions checks that an action lists with its own kind and group,
// verbs [create], as kube lists serviceaccounts/token, in both forms.
func TestActions(t *testing.T) {
	sa := &resource.Resource{
		GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"},
		Kind:                 "ServiceAccount",
		Singular:             "serviceaccount",
		Namespaced:           true,
		Subresources: resource.Subresources{Actions: []resource.Action{{
			Name: "token",
			Kind: schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"},
		}}},
	}
	want := metav1.APIResource{Name: "serviceaccounts/token", Namespaced: true, Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest", Verbs: []string{"create"}}
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			srv := newServer(t, sa)
			dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			var client discovery.DiscoveryInterface = dc
			if legacy {
				client = dc.WithLegacy()
			}
			list, err := client.ServerResourcesForGroupVersion("v1")
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == want.Name })
			if i < 0 {
				t.Fatalf("no %s in %+v", want.Name, list.APIResources)
			}
			got := list.APIResources[i]
			if got.Group != want.Group || got.Version != want.Version || got.Kind != want.Kind || !slices.Equal(got.Verbs, want.Verbs) || got.Namespaced != want.Namespaced {
				t.Fatalf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestScale checks /scale is listed as kube lists a custom resource's:
// after /status, with autoscaling/v1 Scale as its kind.
func TestScale(t *testing.T) {
	w := widgets("v1")
	w.Subresources.Scale = &resource.Scale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}
	srv := newServer(t, w)

	_, body := get(t, srv.URL+"/apis/example.com/v1", nil)
	var legacy metav1.APIResourceList
	if err := json.Unmarshal(body, &legacy); err != nil {
		t.Fatal(err)
	}
	wantLegacy := []metav1.APIResource{
		{Name: "widgets/status", Namespaced: true, Kind: "Widget", Verbs: []string{"get", "patch", "update"}},
		{Name: "widgets/scale", Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: []string{"get", "patch", "update"}},
	}
	if diff := cmp.Diff(wantLegacy, legacy.APIResources[1:]); diff != "" {
		t.Fatalf("legacy subresources (-want +got):\n%s", diff)
	}

	_, body = get(t, srv.URL+"/apis", http.Header{"Accept": {kdiscovery.MediaTypeV2 + ",application/json"}})
	var aggregated apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &aggregated); err != nil {
		t.Fatal(err)
	}
	wantAggregated := []apidiscoveryv2.APISubresourceDiscovery{
		{Subresource: "status", ResponseKind: &metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Verbs: []string{"get", "patch", "update"}},
		{Subresource: "scale", ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: []string{"get", "patch", "update"}},
	}
	if len(aggregated.Items) != 1 || len(aggregated.Items[0].Versions) != 1 || len(aggregated.Items[0].Versions[0].Resources) != 1 {
		t.Fatalf("aggregated discovery: %s", body)
	}
	if diff := cmp.Diff(wantAggregated, aggregated.Items[0].Versions[0].Resources[0].Subresources); diff != "" {
		t.Fatalf("aggregated subresources (-want +got):\n%s", diff)
	}
}
