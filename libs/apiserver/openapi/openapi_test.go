package openapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/openapi3"
	"k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
)

func typed(t testing.TB, gvr schema.GroupVersionResource, kind string, namespaced bool, status bool) *resource.Resource {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := rbacv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gvk := gvr.GroupVersion().WithKind(kind)
	objs, err := objects.NewTyped(scheme, gvk, kind+"List")
	if err != nil {
		t.Fatal(err)
	}
	s, err := builtin.Schema(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: gvr,
		Kind:                 kind,
		Singular:             strings.ToLower(kind),
		Namespaced:           namespaced,
		Subresources:         resource.Subresources{Status: status},
		Schema:               s,
		Objects:              objs,
	}
}

func configMaps(t testing.TB) *resource.Resource {
	return typed(t, corev1.SchemeGroupVersion.WithResource("configmaps"), "ConfigMap", true, false)
}

func namespaces(t testing.TB) *resource.Resource {
	return typed(t, corev1.SchemeGroupVersion.WithResource("namespaces"), "Namespace", false, true)
}

// serviceAccounts serve the token action, which takes TokenRequests.
func serviceAccounts(t testing.TB) *resource.Resource {
	r := typed(t, corev1.SchemeGroupVersion.WithResource("serviceaccounts"), "ServiceAccount", true, false)
	gvk := schema.GroupVersionKind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest"}
	s, err := builtin.Schema(gvk)
	if err != nil {
		t.Fatal(err)
	}
	r.Subresources.Actions = []resource.Action{{Name: "token", Kind: gvk, Schema: s}}
	return r
}

func roles(t testing.TB) *resource.Resource {
	return typed(t, rbacv1.SchemeGroupVersion.WithResource("roles"), "Role", true, false)
}

// widgets is a custom resource without a schema.
func widgets() *resource.Resource {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	return &resource.Resource{
		GroupVersionResource: gvk.GroupVersion().WithResource("widgets"),
		Kind:                 gvk.Kind,
		Singular:             "widget",
		Namespaced:           true,
		Subresources: resource.Subresources{Status: true, Scale: &resource.Scale{
			SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas",
		}},
		Objects: objects.NewUnstructured(gvk, "WidgetList"),
	}
}

// gadgets is a custom resource with a declared schema.
func gadgets() *resource.Resource {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gadget"}
	const name = "com.example.v1.Gadget"
	gadget := spec.Schema{SchemaProps: spec.SchemaProps{
		Description: "Gadget is a test kind.",
		Type:        spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty(),
			"kind":       *spec.StringProperty(),
			"metadata":   *spec.RefSchema("#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"),
			"spec": {SchemaProps: spec.SchemaProps{
				Description: "Spec is what the gadget should be.",
				Type:        spec.StringOrArray{"object"},
				Properties: map[string]spec.Schema{
					"size": *spec.Int64Property().WithDescription("Size of the gadget in inches."),
				},
			}},
		},
	}}
	gadget.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
	return &resource.Resource{
		GroupVersionResource: gvk.GroupVersion().WithResource("gadgets"),
		Kind:                 gvk.Kind,
		Singular:             "gadget",
		Schema:               &resource.Schema{Ref: name, Definitions: map[string]*spec.Schema{name: &gadget}},
		Objects:              objects.NewUnstructured(gvk, "GadgetList"),
	}
}

func newServer(t testing.TB, resources ...*resource.Resource) (*httptest.Server, *openapi.Set) {
	t.Helper()
	set, err := openapi.NewSet(resources, openapi.WithVersion("v1.32.0"))
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	set.Register(e)
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv, set
}

// noRedirects reports redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t testing.TB, u string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := noRedirects.Do(req)
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

type index struct {
	Paths map[string]struct {
		ServerRelativeURL string `json:"serverRelativeURL"`
	} `json:"paths"`
}

func getIndex(t testing.TB, srv *httptest.Server) index {
	t.Helper()
	resp, body := get(t, srv.URL+openapi.PathV3, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("index: status %d: %s", resp.StatusCode, body)
	}
	var idx index
	if err := json.Unmarshal(body, &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestIndexAndHashes(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), namespaces(t), roles(t), widgets())
	idx := getIndex(t, srv)
	if diff := cmp.Diff([]string{"api/v1", "apis/example.com/v1", "apis/rbac.authorization.k8s.io/v1"}, keys(idx.Paths)); diff != "" {
		t.Fatalf("index paths (-want +got):\n%s", diff)
	}
	hashURL := regexp.MustCompile(`^/openapi/v3/(api/v1|apis/[^?]+)\?hash=([0-9A-F]{128})$`)
	for key, p := range idx.Paths {
		t.Run(key, func(t *testing.T) {
			m := hashURL.FindStringSubmatch(p.ServerRelativeURL)
			if m == nil || m[1] != key {
				t.Fatalf("serverRelativeURL %q", p.ServerRelativeURL)
			}
			hash := m[2]

			resp, body := get(t, srv.URL+p.ServerRelativeURL, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}
			for h, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, immutable", "Etag": `"` + hash + `"`} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s = %q, want %q", h, got, want)
				}
			}
			if resp.Header.Get("Expires") == "" {
				t.Error("no Expires header on a hashed document")
			}
			var doc spec3.OpenAPI
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Version != "3.0.0" || doc.Info.Version != "v1.32.0" {
				t.Fatalf("openapi %q, info %+v", doc.Version, doc.Info)
			}

			resp, _ = get(t, srv.URL+openapi.PathV3+"/"+key+"?hash=0123", nil)
			if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusMovedPermanently || loc != p.ServerRelativeURL {
				t.Fatalf("stale hash: status %d, Location %q, want 301 to %q", resp.StatusCode, loc, p.ServerRelativeURL)
			}

			resp, _ = get(t, srv.URL+openapi.PathV3+"/"+key, nil)
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") == "public, immutable" {
				t.Fatalf("without hash: status %d, Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
			}
			resp, _ = get(t, srv.URL+openapi.PathV3+"/"+key, http.Header{"If-None-Match": {`"` + hash + `"`}})
			if resp.StatusCode != http.StatusNotModified {
				t.Fatalf("If-None-Match: status %d", resp.StatusCode)
			}
		})
	}

	resp, body := get(t, srv.URL+openapi.PathV3+"/apis/other.io/v1", nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"kind":"Status"`) {
		t.Fatalf("unknown group-version: status %d: %s", resp.StatusCode, body)
	}
}

func getDoc(t *testing.T, srv *httptest.Server, key string) (*spec3.OpenAPI, []byte) {
	t.Helper()
	resp, body := get(t, srv.URL+openapi.PathV3+"/"+key, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d", key, resp.StatusCode)
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	return &doc, body
}

func TestOperations(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), namespaces(t), roles(t), widgets(), serviceAccounts(t))
	tests := []struct {
		doc, path, method, id, action string
	}{
		{"api/v1", "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", "post", "createCoreV1NamespacedServiceAccountToken", "post"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps", "get", "listCoreV1NamespacedConfigMap", "list"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps", "post", "createCoreV1NamespacedConfigMap", "post"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps", "delete", "deleteCoreV1CollectionNamespacedConfigMap", "deletecollection"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps/{name}", "get", "readCoreV1NamespacedConfigMap", "get"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps/{name}", "put", "replaceCoreV1NamespacedConfigMap", "put"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps/{name}", "patch", "patchCoreV1NamespacedConfigMap", "patch"},
		{"api/v1", "/api/v1/namespaces/{namespace}/configmaps/{name}", "delete", "deleteCoreV1NamespacedConfigMap", "delete"},
		{"api/v1", "/api/v1/configmaps", "get", "listCoreV1ConfigMapForAllNamespaces", "list"},
		{"api/v1", "/api/v1/watch/namespaces/{namespace}/configmaps", "get", "watchCoreV1NamespacedConfigMapList", "watchlist"},
		{"api/v1", "/api/v1/watch/namespaces/{namespace}/configmaps/{name}", "get", "watchCoreV1NamespacedConfigMap", "watch"},
		{"api/v1", "/api/v1/watch/configmaps", "get", "watchCoreV1ConfigMapListForAllNamespaces", "watchlist"},
		{"api/v1", "/api/v1/namespaces", "get", "listCoreV1Namespace", "list"},
		{"api/v1", "/api/v1/namespaces/{name}/status", "put", "replaceCoreV1NamespaceStatus", "put"},
		{"api/v1", "/api/v1/namespaces/{name}/status", "patch", "patchCoreV1NamespaceStatus", "patch"},
		{"apis/rbac.authorization.k8s.io/v1", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles/{name}", "get", "readRbacAuthorizationV1NamespacedRole", "get"},
		{"apis/example.com/v1", "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status", "get", "readExampleComV1NamespacedWidgetStatus", "get"},
		{"apis/example.com/v1", "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale", "get", "readExampleComV1NamespacedWidgetScale", "get"},
		{"apis/example.com/v1", "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale", "put", "replaceExampleComV1NamespacedWidgetScale", "put"},
		{"apis/example.com/v1", "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale", "patch", "patchExampleComV1NamespacedWidgetScale", "patch"},
	}
	docs := map[string]*spec3.OpenAPI{}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			doc, ok := docs[tt.doc]
			if !ok {
				doc, _ = getDoc(t, srv, tt.doc)
				docs[tt.doc] = doc
			}
			item := doc.Paths.Paths[tt.path]
			if item == nil {
				t.Fatalf("no path %s in %v", tt.path, keys(doc.Paths.Paths))
			}
			op := map[string]*spec3.Operation{"get": item.Get, "put": item.Put, "post": item.Post, "delete": item.Delete, "patch": item.Patch}[tt.method]
			if op == nil {
				t.Fatalf("no %s operation", tt.method)
			}
			if op.OperationId != tt.id || op.Extensions["x-kubernetes-action"] != tt.action {
				t.Fatalf("operation %q action %v, want %q %q", op.OperationId, op.Extensions["x-kubernetes-action"], tt.id, tt.action)
			}
			if op.Extensions["x-kubernetes-group-version-kind"] == nil {
				t.Fatal("operation has no x-kubernetes-group-version-kind")
			}
		})
	}

	t.Run("verbs not served have no path", func(t *testing.T) {
		r := widgets()
		r.Verbs = []string{"get", "list"}
		srv, _ := newServer(t, r)
		doc, _ := getDoc(t, srv, "apis/example.com/v1")
		if _, ok := doc.Paths.Paths["/apis/example.com/v1/watch/namespaces/{namespace}/widgets"]; ok {
			t.Fatal("watch path of a resource that does not watch")
		}
		item := doc.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]
		if item == nil || item.Get == nil || item.Put != nil || item.Delete != nil || item.Patch != nil {
			t.Fatalf("item path: %+v", item)
		}
	})

	t.Run("scale reads and writes Scales", func(t *testing.T) {
		const scale = "#/components/schemas/io.k8s.api.autoscaling.v1.Scale"
		doc := docs["apis/example.com/v1"]
		item := doc.Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/scale"]
		if item == nil || item.Get == nil || item.Put == nil || item.Patch == nil {
			t.Fatalf("scale path %+v, want get, put and patch", item)
		}
		if item.Delete != nil || item.Post != nil {
			t.Fatalf("scale serves more than get, put and patch: %+v", item)
		}
		if got := item.Put.RequestBody.Content["*/*"].Schema.Ref.String(); got != scale {
			t.Fatalf("put body %q, want %q", got, scale)
		}
		for method, op := range map[string]*spec3.Operation{"get": item.Get, "put": item.Put, "patch": item.Patch} {
			if got := op.Responses.StatusCodeResponses[200].Content["application/json"].Schema.Ref.String(); got != scale {
				t.Fatalf("%s answers %q, want %q", method, got, scale)
			}
		}
		if doc.Components.Schemas["io.k8s.api.autoscaling.v1.Scale"] == nil {
			t.Fatal("no Scale schema")
		}
		if _, ok := item.Patch.RequestBody.Content["application/strategic-merge-patch+json"]; ok {
			t.Fatal("scale of a custom resource takes strategic merge patches")
		}
	})

	t.Run("strategic merge patch only for typed objects", func(t *testing.T) {
		const smp = "application/strategic-merge-patch+json"
		cm := docs["api/v1"].Paths.Paths["/api/v1/namespaces/{namespace}/configmaps/{name}"].Patch.RequestBody.Content
		w := docs["apis/example.com/v1"].Paths.Paths["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"].Patch.RequestBody.Content
		if cm[smp] == nil || w[smp] != nil || w["application/apply-patch+yaml"] == nil {
			t.Fatalf("configmap patch types %v, widget patch types %v", keys(cm), keys(w))
		}
	})
}

// Every reference in every document must name one of its own components:
// clients resolve them within the document.
func TestReferencesResolve(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), namespaces(t), roles(t), widgets(), gadgets(), serviceAccounts(t))
	ref := regexp.MustCompile(`"\$ref":"([^"]*)"`)
	for key := range getIndex(t, srv).Paths {
		t.Run(key, func(t *testing.T) {
			doc, body := getDoc(t, srv, key)
			matches := ref.FindAllStringSubmatch(string(body), -1)
			if len(matches) == 0 {
				t.Fatal("no references at all")
			}
			for _, m := range matches {
				name, ok := strings.CutPrefix(m[1], "#/components/schemas/")
				if !ok {
					t.Fatalf("reference %q is not to a component schema", m[1])
				}
				if doc.Components.Schemas[name] == nil {
					t.Fatalf("reference %q has no component", m[1])
				}
			}
		})
	}
}

func TestSchemas(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), widgets(), gadgets())
	core, _ := getDoc(t, srv, "api/v1")
	cm := core.Components.Schemas["io.k8s.api.core.v1.ConfigMap"]
	if cm == nil || cm.Extensions["x-kubernetes-group-version-kind"] == nil {
		t.Fatalf("ConfigMap component: %+v", cm)
	}
	if got := cm.Properties["metadata"].AllOf; len(got) != 1 || got[0].Ref.String() != "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Fatalf("ConfigMap metadata: %+v", cm.Properties["metadata"])
	}
	for _, name := range []string{"io.k8s.api.core.v1.ConfigMapList", "io.k8s.apimachinery.pkg.apis.meta.v1.Status", "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions", "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"} {
		if core.Components.Schemas[name] == nil {
			t.Errorf("no component %s", name)
		}
	}
	if core.Components.Schemas["io.k8s.api.rbac.v1.Role"] != nil {
		t.Error("core/v1 document carries rbac definitions")
	}

	ex, _ := getDoc(t, srv, "apis/example.com/v1")
	w := ex.Components.Schemas["com.example.v1.Widget"]
	if w == nil || w.Extensions["x-kubernetes-preserve-unknown-fields"] != true {
		t.Fatalf("Widget component: %+v", w)
	}
	wl := ex.Components.Schemas["com.example.v1.WidgetList"]
	if wl == nil || wl.Properties["items"].Items.Schema.Ref.String() != "#/components/schemas/com.example.v1.Widget" {
		t.Fatalf("WidgetList component: %+v", wl)
	}
	g := ex.Components.Schemas["com.example.v1.Gadget"]
	if g == nil || g.Properties["spec"].Properties["size"].Description != "Size of the gadget in inches." {
		t.Fatalf("Gadget component: %+v", g)
	}
	if ex.Components.Schemas["com.example.v1.GadgetList"] == nil {
		t.Fatal("no GadgetList component")
	}
}

func TestReplace(t *testing.T) {
	srv, set := newServer(t, configMaps(t))
	before := getIndex(t, srv)

	if err := set.Replace([]*resource.Resource{configMaps(t), widgets()}); err != nil {
		t.Fatal(err)
	}
	added := getIndex(t, srv)
	if diff := cmp.Diff([]string{"api/v1", "apis/example.com/v1"}, keys(added.Paths)); diff != "" {
		t.Fatalf("after adding widgets (-want +got):\n%s", diff)
	}
	if added.Paths["api/v1"] != before.Paths["api/v1"] {
		t.Fatalf("unchanged api/v1 changed hash: %v then %v", before.Paths["api/v1"], added.Paths["api/v1"])
	}
	if resp, _ := get(t, srv.URL+added.Paths["apis/example.com/v1"].ServerRelativeURL, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("new group-version: status %d", resp.StatusCode)
	}

	if err := set.Replace([]*resource.Resource{configMaps(t)}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"api/v1"}, keys(getIndex(t, srv).Paths)); diff != "" {
		t.Fatalf("after removing widgets (-want +got):\n%s", diff)
	}
	if resp, _ := get(t, srv.URL+openapi.PathV3+"/apis/example.com/v1", nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("removed group-version: status %d", resp.StatusCode)
	}
	resp, body := get(t, srv.URL+openapi.PathV2, nil)
	if resp.StatusCode != http.StatusOK || strings.Contains(string(body), "com.example.v1.Widget") {
		t.Fatalf("v2 after removing widgets: status %d, still names Widget: %v", resp.StatusCode, strings.Contains(string(body), "com.example.v1.Widget"))
	}
}

func TestV2(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), roles(t), widgets())
	resp, body := get(t, srv.URL+openapi.PathV2, http.Header{"Accept": {"application/json"}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var sw spec.Swagger
	if err := json.Unmarshal(body, &sw); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/v1/namespaces/{namespace}/configmaps/{name}", "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles", "/apis/example.com/v1/namespaces/{namespace}/widgets"} {
		if _, ok := sw.Paths.Paths[p]; !ok {
			t.Errorf("no path %s", p)
		}
	}
	for _, d := range []string{"io.k8s.api.core.v1.ConfigMap", "io.k8s.api.rbac.v1.Role", "com.example.v1.Widget"} {
		if _, ok := sw.Definitions[d]; !ok {
			t.Errorf("no definition %s", d)
		}
	}

	resp, body = get(t, srv.URL+openapi.PathV2, http.Header{"Accept": {"application/com.github.proto-openapi.spec.v2@v1.0+protobuf"}})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/com.github.proto-openapi.spec.v2.v1.0+protobuf" || len(body) == 0 {
		t.Fatalf("protobuf: status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestClientGo(t *testing.T) {
	srv, _ := newServer(t, configMaps(t), namespaces(t), roles(t), gadgets())
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("openapi v3", func(t *testing.T) {
		root := openapi3.NewRoot(dc.OpenAPIV3())
		gvs, err := root.GroupVersions()
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(gvs, func(i, j int) bool { return gvs[i].String() < gvs[j].String() })
		want := []schema.GroupVersion{{Group: "example.com", Version: "v1"}, {Group: "rbac.authorization.k8s.io", Version: "v1"}, {Version: "v1"}}
		if diff := cmp.Diff(want, gvs); diff != "" {
			t.Fatalf("group-versions (-want +got):\n%s", diff)
		}
		doc, err := root.GVSpec(schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"})
		if err != nil {
			t.Fatal(err)
		}
		role := doc.Components.Schemas["io.k8s.api.rbac.v1.Role"]
		if role == nil || role.Properties["rules"].Description == "" {
			t.Fatalf("Role component: %+v", role)
		}
		if _, err := root.GVSpec(schema.GroupVersion{Group: "other.io", Version: "v1"}); err == nil {
			t.Fatal("GVSpec of an unknown group-version succeeded")
		}
	})

	t.Run("openapi v2", func(t *testing.T) {
		doc, err := dc.OpenAPISchema()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
			found = found || d.GetName() == "com.example.v1.Gadget"
		}
		if !found {
			t.Fatal("v2 document read by client-go has no Gadget definition")
		}
	})
}

func TestUnknownReference(t *testing.T) {
	r := gadgets()
	r.Schema.Ref = "com.example.v1.Missing"
	if _, err := openapi.NewSet([]*resource.Resource{r}); err == nil {
		t.Fatal("NewSet accepted a schema whose definition is missing")
	}
}
