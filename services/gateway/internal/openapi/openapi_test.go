package openapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	restclient "k8s.io/client-go/rest"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/etcdtest"
	gwdiscovery "kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/discovery/backendtest"
	"kplane.dev/services/gateway/internal/openapi"
)

type table struct {
	mu     sync.Mutex
	routes []gwdiscovery.Route
}

func (t *table) Routes() []gwdiscovery.Route {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.routes)
}

type fixture struct {
	core, widgets *backendtest.Backend
	merger        *openapi.Merger
	gateway       *restclient.Config
}

func start(t *testing.T) *fixture {
	t.Helper()
	etcd := etcdtest.Start(t).Client(t)
	f := &fixture{
		core:    backendtest.Start(t, etcd, "/core", backendtest.Resources(t, apitest.ConfigMaps)),
		widgets: backendtest.Start(t, etcd, "/widgets", backendtest.Resources(t, apitest.Widgets)),
	}
	routes := &table{routes: []gwdiscovery.Route{
		{GroupVersion: schema.GroupVersion{Version: "v1"}, Available: true, Backend: f.core.URL},
		{GroupVersion: apitest.Widgets.GroupVersion(), Available: true, Backend: f.widgets.URL},
		{GroupVersion: schema.GroupVersion{Group: "down.example.com", Version: "v1"}, Backend: f.core.URL},
	}}
	f.merger, f.gateway = gateway(t, routes)
	f.sync(t)
	return f
}

// gateway serves the merge of the routes' documents, not yet synced.
func gateway(t *testing.T, routes gwdiscovery.Routes) (*openapi.Merger, *restclient.Config) {
	t.Helper()
	m, err := openapi.New(routes, http.DefaultClient, openapi.WithTimeout(5*time.Second), openapi.WithLogger(backendtest.Logger(t)))
	if err != nil {
		t.Fatalf("new merger: %v", err)
	}
	e := echo.New()
	m.Register(e)
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	return m, &restclient.Config{Host: hs.URL, QPS: -1}
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	if err := f.merger.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

func client(t *testing.T, cfg *restclient.Config) *discovery.DiscoveryClient {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return dc
}

// v3 is every group-version's document as client-go's OpenAPI v3 client
// reads it, and the URLs the index lists.
func v3(t *testing.T, cfg *restclient.Config) (docs map[string]string, urls map[string]string) {
	t.Helper()
	paths, err := client(t, cfg).OpenAPIV3().Paths()
	if err != nil {
		t.Fatalf("openapi v3 index of %s: %v", cfg.Host, err)
	}
	docs, urls = map[string]string{}, map[string]string{}
	for p, gv := range paths {
		b, err := gv.Schema("application/json")
		if err != nil {
			t.Fatalf("openapi v3 of %s from %s: %v", p, cfg.Host, err)
		}
		docs[p] = string(b)
		urls[p] = gv.ServerRelativeURL()
	}
	return docs, urls
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestV3(t *testing.T) {
	f := start(t)
	coreDocs, coreURLs := v3(t, f.core.Config)
	widgetDocs, widgetURLs := v3(t, f.widgets.Config)
	docs, urls := v3(t, f.gateway)
	if len(docs) != 2 || docs["api/v1"] == "" || docs["apis/example.com/v1"] == "" {
		t.Fatalf("gateway serves v3 documents of %v, want api/v1 and apis/example.com/v1", slices.Sorted(maps.Keys(docs)))
	}
	if diff := cmp.Diff(merge(coreURLs, widgetURLs), urls); diff != "" {
		t.Errorf("index URLs (-backends +gateway):\n%s", diff)
	}
	if diff := cmp.Diff(merge(coreDocs, widgetDocs), docs); diff != "" {
		t.Errorf("documents (-backends +gateway):\n%s", diff)
	}

	t.Run("caching headers pass through", func(t *testing.T) {
		resp, err := http.Get(f.gateway.Host + urls["apis/example.com/v1"])
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Cache-Control") != "public, immutable" || resp.Header.Get("ETag") == "" {
			t.Errorf("GET with hash: status %d, Cache-Control %q, ETag %q", resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("ETag"))
		}
	})

	t.Run("a backend down leaves its group-versions out", func(t *testing.T) {
		f.widgets.Stop(t)
		f.sync(t)
		_, urls := v3(t, f.gateway)
		if diff := cmp.Diff(coreURLs, urls); diff != "" {
			t.Errorf("index with widgets down (-core +gateway):\n%s", diff)
		}
		resp, err := http.Get(f.gateway.Host + "/openapi/v3/apis/example.com/v1")
		if err != nil {
			t.Fatal(err)
		}
		if err := resp.Body.Close(); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET example.com/v1 with widgets down: status %d, want 404", resp.StatusCode)
		}
	})
}

// v2 is the paths and definitions of /openapi/v2 as client-go reads it
// (in protobuf, as kubectl does).
func v2(t *testing.T, cfg *restclient.Config) (paths, definitions []string) {
	t.Helper()
	doc, err := client(t, cfg).OpenAPISchema()
	if err != nil {
		t.Fatalf("openapi v2 of %s: %v", cfg.Host, err)
	}
	return names(doc.GetPaths().GetPath()), definitionNames(doc)
}

func names(items []*openapi_v2.NamedPathItem) []string {
	var out []string
	for _, p := range items {
		out = append(out, p.GetName())
	}
	return out
}

func definitionNames(doc *openapi_v2.Document) []string {
	var out []string
	for _, d := range doc.GetDefinitions().GetAdditionalProperties() {
		out = append(out, d.GetName())
	}
	return out
}

func union(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, s := range l {
			if !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

func TestV2(t *testing.T) {
	f := start(t)
	corePaths, coreDefs := v2(t, f.core.Config)
	widgetPaths, widgetDefs := v2(t, f.widgets.Config)
	paths, defs := v2(t, f.gateway)
	for _, p := range []string{"/api/v1/namespaces/{namespace}/configmaps", "/apis/example.com/v1/namespaces/{namespace}/widgets"} {
		if !slices.Contains(paths, p) {
			t.Errorf("merged v2 has no path %s", p)
		}
	}
	if diff := cmp.Diff(union(corePaths, widgetPaths), union(paths)); diff != "" {
		t.Errorf("paths (-backends +gateway):\n%s", diff)
	}
	if diff := cmp.Diff(union(coreDefs, widgetDefs), union(defs)); diff != "" {
		t.Errorf("definitions (-backends +gateway):\n%s", diff)
	}

	f.widgets.Stop(t)
	f.sync(t)
	paths, _ = v2(t, f.gateway)
	if diff := cmp.Diff(union(corePaths), union(paths)); diff != "" {
		t.Errorf("paths with widgets down (-core +gateway):\n%s", diff)
	}
}

const (
	settingsDef   = "io.example.Settings"
	objectMetaDef = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
)

// withSettings is a custom kind whose spec is a definition named
// io.example.Settings with the given content, as two CRDs of different
// groups can each have a definition of one name. Its metadata is the
// built-in ObjectMeta, which every backend publishes alike.
func withSettings(t *testing.T, gvk schema.GroupVersionKind, ref string, settings spec.Schema) *resource.Resource {
	t.Helper()
	builtins, err := builtin.Definitions()
	if err != nil {
		t.Fatalf("load built-in definitions: %v", err)
	}
	defs := maps.Clone(builtins)
	obj := spec.Schema{SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty(),
			"kind":       *spec.StringProperty(),
			"metadata":   *spec.RefSchema("#/definitions/" + objectMetaDef),
			"spec":       *spec.RefSchema("#/definitions/" + settingsDef),
		},
	}}
	obj.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
	defs[ref], defs[settingsDef] = &obj, &settings
	return &resource.Resource{
		GroupVersionResource: gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s"),
		Kind:                 gvk.Kind,
		Singular:             strings.ToLower(gvk.Kind),
		Namespaced:           true,
		Objects:              objects.NewUnstructured(gvk, gvk.Kind+"List"),
		Schema:               &resource.Schema{Ref: ref, Definitions: defs},
	}
}

func objectWith(property string, s spec.Schema) spec.Schema {
	return spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{property: s}}}
}

// swaggerJSON is /openapi/v2 in JSON, references and all.
func swaggerJSON(t *testing.T, cfg *restclient.Config) *spec.Swagger {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, cfg.Host+openapi.PathV2, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d", openapi.PathV2, resp.StatusCode)
	}
	var sw spec.Swagger
	if err := json.NewDecoder(resp.Body).Decode(&sw); err != nil {
		t.Fatalf("decode %s: %v", openapi.PathV2, err)
	}
	return &sw
}

func TestV2DefinitionConflicts(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	gadget := schema.GroupVersionKind{Group: "a.example.com", Version: "v1", Kind: "Gadget"}
	gizmo := schema.GroupVersionKind{Group: "b.example.com", Version: "v1", Kind: "Gizmo"}
	const gadgetDef, gizmoDef = "com.example.a.v1.Gadget", "com.example.b.v1.Gizmo"
	a := backendtest.Start(t, etcd, "/a", []*resource.Resource{withSettings(t, gadget, gadgetDef, objectWith("size", *spec.Int64Property()))})
	b := backendtest.Start(t, etcd, "/b", []*resource.Resource{withSettings(t, gizmo, gizmoDef, objectWith("color", *spec.StringProperty()))})
	// a's group has the higher priority: its definition keeps the name.
	merger, gw := gateway(t, &table{routes: []gwdiscovery.Route{
		{GroupVersion: gizmo.GroupVersion(), GroupPriorityMinimum: 1000, Available: true, Backend: b.URL},
		{GroupVersion: gadget.GroupVersion(), GroupPriorityMinimum: 2000, Available: true, Backend: a.URL},
	}})
	_, aDefs := v2(t, a.Config)
	_, bDefs := v2(t, b.Config)
	if !slices.Contains(aDefs, objectMetaDef) || !slices.Contains(bDefs, objectMetaDef) {
		t.Fatalf("a backend does not publish %s: the backends share no definition", objectMetaDef)
	}

	// Every sync must give the name to the same backend, whatever order
	// the backends answer in.
	for range 3 {
		if err := merger.Sync(context.Background()); err != nil {
			t.Fatalf("sync: %v", err)
		}
		_, defs := v2(t, gw)
		// Definitions both backends publish alike (ObjectMeta, ListMeta,
		// Status...) appear once: only the conflicting one is added.
		if diff := cmp.Diff(union(aDefs, bDefs, []string{settingsDef + "_v2"}), union(defs)); diff != "" {
			t.Errorf("definitions (-backends and the renamed one +gateway):\n%s", diff)
		}

		sw := swaggerJSON(t, gw)
		for def, want := range map[string]string{settingsDef: "size", settingsDef + "_v2": "color"} {
			if got := slices.Sorted(maps.Keys(sw.Definitions[def].Properties)); !slices.Equal(got, []string{want}) {
				t.Errorf("%s has properties %v, want [%s]", def, got, want)
			}
		}
		for def, want := range map[string]string{gadgetDef: settingsDef, gizmoDef: settingsDef + "_v2"} {
			ref := sw.Definitions[def].Properties["spec"].Ref
			if got := ref.String(); got != "#/definitions/"+want {
				t.Errorf("%s's spec refers to %q, want #/definitions/%s", def, got, want)
			}
		}
	}
}
