package openapi_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/apitest"
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
	m, err := openapi.New(routes, http.DefaultClient, openapi.WithTimeout(5*time.Second), openapi.WithLogger(backendtest.Logger(t)))
	if err != nil {
		t.Fatalf("new merger: %v", err)
	}
	f.merger = m
	e := echo.New()
	m.Register(e)
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	f.gateway = &restclient.Config{Host: hs.URL, QPS: -1}
	f.sync(t)
	return f
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
