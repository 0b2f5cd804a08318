package discovery_test

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/apitest"
	libdiscovery "kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/etcdtest"
	gwdiscovery "kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/discovery/backendtest"
)

// table is a routing table a test edits.
type table struct {
	mu     sync.Mutex
	routes []gwdiscovery.Route
}

func (t *table) Routes() []gwdiscovery.Route {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.routes)
}

// fixture is a gateway serving the merged discovery of two backends: core
// (configmaps in v1) and widgets (example.com/v1).
type fixture struct {
	core, widgets *backendtest.Backend
	merger        *gwdiscovery.Merger
	gateway       *restclient.Config
}

func start(t *testing.T, opts ...gwdiscovery.Option) *fixture {
	t.Helper()
	etcd := etcdtest.Start(t).Client(t)
	f := &fixture{
		core:    backendtest.Start(t, etcd, "/core", backendtest.Resources(t, apitest.ConfigMaps)),
		widgets: backendtest.Start(t, etcd, "/widgets", backendtest.Resources(t, apitest.Widgets)),
	}
	routes := &table{routes: []gwdiscovery.Route{
		{GroupVersion: schema.GroupVersion{Version: "v1"}, APIService: "v1.", GroupPriorityMinimum: 18000, VersionPriority: 1, Available: true, Backend: f.core.URL},
		{GroupVersion: apitest.Widgets.GroupVersion(), APIService: "v1.example.com", GroupPriorityMinimum: 1000, VersionPriority: 15, Available: true, Backend: f.widgets.URL},
		// Routed but served by no backend: left out of every document.
		{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1beta1"}, GroupPriorityMinimum: 1000, VersionPriority: 9, Available: true, Backend: f.widgets.URL},
		// Unavailable: left out without being fetched.
		{GroupVersion: schema.GroupVersion{Group: "down.example.com", Version: "v1"}, GroupPriorityMinimum: 1000, VersionPriority: 15, Backend: f.core.URL},
	}}
	m, err := gwdiscovery.New(routes, http.DefaultClient, append([]gwdiscovery.Option{gwdiscovery.WithTimeout(5 * time.Second), gwdiscovery.WithLogger(backendtest.Logger(t))}, opts...)...)
	if err != nil {
		t.Fatalf("new merger: %v", err)
	}
	f.merger = m
	f.gateway = serve(t, m)
	f.sync(t)
	return f
}

// serve serves m's documents until the test ends, returning a
// configuration that reaches them.
func serve(t *testing.T, m *gwdiscovery.Merger) *restclient.Config {
	t.Helper()
	e := echo.New()
	m.Register(e)
	hs := httptest.NewServer(e)
	t.Cleanup(hs.Close)
	return &restclient.Config{Host: hs.URL, QPS: -1}
}

// run runs m until the test ends.
func run(t *testing.T, m *gwdiscovery.Merger) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

func (f *fixture) sync(t *testing.T) {
	t.Helper()
	if err := f.merger.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// served is what a discovery client reports: groups with their versions,
// and resources by group-version.
type served struct {
	Groups    []metav1.APIGroup
	Resources map[string][]metav1.APIResource
}

func discover(t *testing.T, cfg *restclient.Config, legacy bool) served {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatalf("discovery client: %v", err)
	}
	dc.UseLegacyDiscovery = legacy
	groups, lists, err := dc.ServerGroupsAndResources()
	if err != nil {
		t.Fatalf("discover %s: %v", cfg.Host, err)
	}
	s := served{Resources: map[string][]metav1.APIResource{}}
	for _, g := range groups {
		s.Groups = append(s.Groups, *g)
	}
	for _, l := range lists {
		s.Resources[l.GroupVersion] = l.APIResources
	}
	return s
}

// union is what one server serving every backend's resources would report.
func union(parts ...served) served {
	s := served{Resources: map[string][]metav1.APIResource{}}
	for _, p := range parts {
		for _, g := range p.Groups {
			// A backend without the legacy group reports it empty.
			if len(g.Versions) > 0 {
				s.Groups = append(s.Groups, g)
			}
		}
		for gv, rs := range p.Resources {
			s.Resources[gv] = rs
		}
	}
	return s
}

func TestMergedDiscoveryMatchesBackends(t *testing.T) {
	f := start(t)
	for _, legacy := range []bool{false, true} {
		name := "aggregated"
		if legacy {
			name = "legacy"
		}
		t.Run(name, func(t *testing.T) {
			want := union(discover(t, f.core.Config, legacy), discover(t, f.widgets.Config, legacy))
			got := discover(t, f.gateway, legacy)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("gateway discovery differs from the backends' (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAggregatedETag(t *testing.T) {
	f := start(t)
	for _, tc := range []struct{ path, accept string }{
		{"/api", libdiscovery.MediaTypeV2},
		{"/apis", libdiscovery.MediaTypeV2},
		{"/apis", libdiscovery.MediaTypeV2Beta1},
		// kube-apiserver serves the roots with a trailing slash too.
		{"/api/", libdiscovery.MediaTypeV2},
		{"/apis/", libdiscovery.MediaTypeV2},
	} {
		t.Run(tc.path+" "+tc.accept, func(t *testing.T) {
			first := get(t, f.gateway.Host+tc.path, tc.accept, "")
			etag := first.Header.Get("ETag")
			if first.StatusCode != http.StatusOK || etag == "" || first.Header.Get("Content-Type") != tc.accept {
				t.Fatalf("first GET: status %d, ETag %q, Content-Type %q", first.StatusCode, etag, first.Header.Get("Content-Type"))
			}
			if again := get(t, f.gateway.Host+tc.path, tc.accept, etag); again.StatusCode != http.StatusNotModified {
				t.Errorf("GET with If-None-Match %s: status %d, want 304", etag, again.StatusCode)
			}
		})
	}
	t.Run("changes when a group leaves", func(t *testing.T) {
		before := get(t, f.gateway.Host+"/apis", libdiscovery.MediaTypeV2, "").Header.Get("ETag")
		f.widgets.Stop(t)
		f.sync(t)
		if resp := get(t, f.gateway.Host+"/apis", libdiscovery.MediaTypeV2, before); resp.StatusCode != http.StatusOK {
			t.Errorf("GET with the old ETag: status %d, want 200", resp.StatusCode)
		}
	})
}

func get(t *testing.T, url, accept, ifNoneMatch string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", accept)
	if ifNoneMatch != "" {
		req.Header.Set("If-None-Match", ifNoneMatch)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	if err := resp.Body.Close(); err != nil {
		t.Fatal(err)
	}
	return resp
}

func TestBackendDownLeavesItsGroupOut(t *testing.T) {
	f := start(t)
	core := map[bool]served{false: discover(t, f.core.Config, false), true: discover(t, f.core.Config, true)}
	f.widgets.Stop(t)
	f.sync(t)
	for _, legacy := range []bool{false, true} {
		got := discover(t, f.gateway, legacy)
		if diff := cmp.Diff(core[legacy], got); diff != "" {
			t.Errorf("legacy=%t: with widgets down, gateway discovery differs from core's (-want +got):\n%s", legacy, diff)
		}
	}
	if resp := get(t, f.gateway.Host+"/apis/example.com", "application/json", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /apis/example.com with widgets down: status %d, want 404", resp.StatusCode)
	}

	f.widgets.Start(t)
	f.sync(t)
	for _, legacy := range []bool{false, true} {
		want := union(core[legacy], discover(t, f.widgets.Config, legacy))
		if diff := cmp.Diff(want, discover(t, f.gateway, legacy)); diff != "" {
			t.Errorf("legacy=%t: widgets back, gateway discovery differs from the backends' (-want +got):\n%s", legacy, diff)
		}
	}
}

// TestBackendChangeWithoutRouteChange shows a backend's new resources
// (a CRD established in a group already routed) reach the merged
// documents at the next check, long before the interval, and that the
// change is reported for the OpenAPI documents to follow.
func TestBackendChangeWithoutRouteChange(t *testing.T) {
	changes := make(chan struct{}, 10)
	f := start(t, gwdiscovery.WithInterval(time.Hour), gwdiscovery.WithCheckInterval(20*time.Millisecond),
		gwdiscovery.WithOnChange(func() { changes <- struct{}{} }))
	run(t, f.merger)
	if got := discover(t, f.gateway, false).Resources["example.com/v1"]; len(got) == 0 {
		t.Fatal("widgets are not served before the change")
	}
	if err := f.widgets.Server.Replace(nil); err != nil {
		t.Fatalf("replace the backend's resources: %v", err)
	}
	select {
	case <-changes:
	case <-time.After(10 * time.Second):
		t.Fatal("no change reported within 10s of the backend's documents changing")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := discover(t, f.gateway, false).Resources["example.com/v1"]; !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("example.com/v1 still served by the gateway after its backend dropped it")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestChangeMetBySyncIsReported shows a change that a sync meets before
// any check does (the interval's sync, a Refresh, Run's first) is
// reported all the same: otherwise the OpenAPI documents would miss it.
func TestChangeMetBySyncIsReported(t *testing.T) {
	changes := 0
	f := start(t, gwdiscovery.WithInterval(time.Hour), gwdiscovery.WithCheckInterval(time.Hour),
		gwdiscovery.WithOnChange(func() { changes++ }))
	f.sync(t)
	if changes != 0 {
		t.Fatalf("%d changes reported with the backends unchanged, want 0", changes)
	}
	if err := f.widgets.Server.Replace(nil); err != nil {
		t.Fatalf("replace the backend's resources: %v", err)
	}
	f.sync(t)
	if changes != 1 {
		t.Errorf("%d changes reported after the backend's documents changed, want 1", changes)
	}
}

// TestTrailingSlash: kube-apiserver answers every legacy discovery path
// with a trailing slash as without (the conformance suite reads
// /apis/<group>/).
func TestTrailingSlash(t *testing.T) {
	f := start(t)
	body := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(f.gateway.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: status %d, %v", path, resp.StatusCode, err)
		}
		return b
	}
	var groups metav1.APIGroupList
	if err := stdjson.Unmarshal(body("/apis"), &groups); err != nil || len(groups.Groups) == 0 {
		t.Fatalf("read /apis: %v %+v", err, groups)
	}
	g := groups.Groups[0]
	for _, path := range []string{"/apis", "/api/v1", "/apis/" + g.Name, "/apis/" + g.PreferredVersion.GroupVersion} {
		if without, with := body(path), body(path+"/"); !bytes.Equal(without, with) {
			t.Errorf("GET %s/ answered %s, without the slash %s", path, with, without)
		}
	}
}

// fetchCounter counts the requests for /apis a merger sends to one
// backend.
type fetchCounter struct {
	host string
	n    atomic.Int64
}

func (c *fetchCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == c.host && r.URL.Path == "/apis" {
		c.n.Add(1)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestNewRouteBeforeItsBackendServesIt: a CRD's APIService can reach the
// gateway a moment before crd serves the CRD, and the sync its new route
// starts finds nothing there. The merger asks again soon, not at the next
// check (an hour here), so that the group reaches discovery at once.
func TestNewRouteBeforeItsBackendServesIt(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	core := backendtest.Start(t, etcd, "/core", backendtest.Resources(t, apitest.ConfigMaps))
	widgets := backendtest.Start(t, etcd, "/widgets", nil)
	routes := &table{routes: []gwdiscovery.Route{
		{GroupVersion: schema.GroupVersion{Version: "v1"}, APIService: "v1.", GroupPriorityMinimum: 18000, VersionPriority: 1, Available: true, Backend: core.URL},
		// Never served: a route missing for good does not hold back
		// the retries for a new one.
		{GroupVersion: schema.GroupVersion{Group: "example.com", Version: "v1beta1"}, GroupPriorityMinimum: 1000, VersionPriority: 9, Available: true, Backend: widgets.URL},
	}}
	fetches := &fetchCounter{host: widgets.URL.Host}
	m, err := gwdiscovery.New(routes, &http.Client{Transport: fetches},
		gwdiscovery.WithInterval(time.Hour), gwdiscovery.WithCheckInterval(time.Hour), gwdiscovery.WithLogger(backendtest.Logger(t)))
	if err != nil {
		t.Fatalf("new merger: %v", err)
	}
	gateway := serve(t, m)
	run(t, m)
	waitFetches := func(n int64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for fetches.n.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the merger read the widgets backend %d times, want %d", fetches.n.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The retries for the route never served end within seconds.
	time.Sleep(3 * time.Second)
	before := fetches.n.Load()

	routes.mu.Lock()
	routes.routes = append(routes.routes, gwdiscovery.Route{GroupVersion: apitest.Widgets.GroupVersion(), APIService: "v1.example.com", GroupPriorityMinimum: 1000, VersionPriority: 15, Available: true, Backend: widgets.URL})
	routes.mu.Unlock()
	m.Refresh()
	waitFetches(before + 1)
	if _, ok := discover(t, gateway, false).Resources["example.com/v1"]; ok {
		t.Fatal("example.com/v1 discovered before its backend serves it")
	}
	if err := widgets.Server.Replace(backendtest.Resources(t, apitest.Widgets)); err != nil {
		t.Fatalf("serve widgets: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := discover(t, gateway, false).Resources["example.com/v1"]; ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("example.com/v1 not discovered within 10s of its backend serving it")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnlistedResourceListedSoon: crd lists a new CRD's resource in its
// aggregated document first and in the group-version's resource list once
// the CRD is established, which it is once the gateway's aggregated
// document lists it. The gateway serves what it has and reads the
// resource list again soon, not at the next check (an hour here).
func TestUnlistedResourceListedSoon(t *testing.T) {
	etcd := etcdtest.Start(t).Client(t)
	unlisted := backendtest.Resources(t, apitest.Widgets)
	for _, r := range unlisted {
		r.Unlisted = true
	}
	widgets := backendtest.Start(t, etcd, "/widgets", unlisted)
	routes := &table{routes: []gwdiscovery.Route{
		{GroupVersion: apitest.Widgets.GroupVersion(), APIService: "v1.example.com", GroupPriorityMinimum: 1000, VersionPriority: 15, Available: true, Backend: widgets.URL},
	}}
	m, err := gwdiscovery.New(routes, http.DefaultClient,
		gwdiscovery.WithInterval(time.Hour), gwdiscovery.WithCheckInterval(time.Hour), gwdiscovery.WithLogger(backendtest.Logger(t)))
	if err != nil {
		t.Fatalf("new merger: %v", err)
	}
	gateway := serve(t, m)
	run(t, m)
	listed := func(legacy bool) bool {
		return slices.ContainsFunc(discover(t, gateway, legacy).Resources["example.com/v1"], func(r metav1.APIResource) bool { return r.Name == "widgets" })
	}
	deadline := time.Now().Add(10 * time.Second)
	for !listed(false) {
		if time.Now().After(deadline) {
			t.Fatal("the aggregated document does not list the unlisted widgets within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if listed(true) {
		t.Fatal("the resource list has the widgets before the backend lists them there")
	}
	if err := widgets.Server.Replace(backendtest.Resources(t, apitest.Widgets)); err != nil {
		t.Fatalf("list widgets: %v", err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !listed(true) {
		if time.Now().After(deadline) {
			t.Fatal("the resource list does not have the widgets within 10s of the backend listing them")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
