package controllers

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionslisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func crdWith(name string, conds ...apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinition {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, c := range conds {
		crd.Status.Conditions = append(crd.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: c, Status: apiextensionsv1.ConditionTrue})
	}
	return crd
}

// awaitFixture runs an awaitDiscovery over the CRDs given, whose
// discovery answers come from listed, on a clock the test moves.
type awaitFixture struct {
	await *awaitDiscovery

	mu          sync.Mutex
	listed      map[string]bool
	checks      map[string]int
	established chan string
	clock       time.Time
}

func newAwaitFixture(t *testing.T, crds ...*apiextensionsv1.CustomResourceDefinition) *awaitFixture {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, crd := range crds {
		if err := indexer.Add(crd); err != nil {
			t.Fatal(err)
		}
	}
	f := &awaitFixture{listed: map[string]bool{}, checks: map[string]int{}, established: make(chan string, 10), clock: time.Unix(1000, 0)}
	discovered := func(_ context.Context, crd *apiextensionsv1.CustomResourceDefinition) (bool, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.checks[crd.Name]++
		return f.listed[crd.Name], nil
	}
	f.await = newAwaitDiscovery(apiextensionslisters.NewCustomResourceDefinitionLister(indexer), discovered,
		func(name string) { f.established <- name }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.await.now = func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.clock
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { f.await.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

func (f *awaitFixture) set(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn()
}

func (f *awaitFixture) checked(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.checks[name]
}

func (f *awaitFixture) waitChecks(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for f.checked(name) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s checked %d times, want %d", name, f.checked(name), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func (f *awaitFixture) wantEstablished(t *testing.T, name string) {
	t.Helper()
	select {
	case got := <-f.established:
		if got != name {
			t.Fatalf("established %s, want %s", got, name)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s was not established", name)
	}
}

func (f *awaitFixture) wantNoneEstablished(t *testing.T) {
	t.Helper()
	select {
	case got := <-f.established:
		t.Fatalf("established %s", got)
	default:
	}
}

func TestAwaitDiscoveryEstablishesOnceListed(t *testing.T) {
	f := newAwaitFixture(t, crdWith("a.example.com", apiextensionsv1.NamesAccepted))
	f.await.add("a.example.com")
	f.waitChecks(t, "a.example.com", 3)
	f.wantNoneEstablished(t)
	f.set(func() { f.listed["a.example.com"] = true })
	f.wantEstablished(t, "a.example.com")
	f.wantNoneEstablished(t)
}

func TestAwaitDiscoveryEstablishesAfterTheWaitAllTheSame(t *testing.T) {
	f := newAwaitFixture(t, crdWith("a.example.com", apiextensionsv1.NamesAccepted))
	f.await.add("a.example.com")
	f.waitChecks(t, "a.example.com", 2)
	f.set(func() { f.clock = f.clock.Add(establishWait - time.Millisecond) })
	n := f.checked("a.example.com")
	f.waitChecks(t, "a.example.com", n+1)
	f.wantNoneEstablished(t)
	f.set(func() { f.clock = f.clock.Add(time.Millisecond) })
	f.wantEstablished(t, "a.example.com")
}

func TestAwaitDiscoveryLeavesOthersAlone(t *testing.T) {
	f := newAwaitFixture(t,
		crdWith("established.example.com", apiextensionsv1.NamesAccepted, apiextensionsv1.Established),
		crdWith("unnamed.example.com"),
		crdWith("listed.example.com", apiextensionsv1.NamesAccepted))
	f.set(func() { f.listed["listed.example.com"] = true })
	for _, name := range []string{"established.example.com", "unnamed.example.com", "gone.example.com", "listed.example.com"} {
		f.await.add(name)
	}
	// The queue hands names out in order: once the last is established,
	// the others were dropped.
	f.wantEstablished(t, "listed.example.com")
	f.wantNoneEstablished(t)
	for _, name := range []string{"established.example.com", "unnamed.example.com", "gone.example.com"} {
		if n := f.checked(name); n != 0 {
			t.Errorf("%s looked up in discovery %d times", name, n)
		}
	}
}

func TestListed(t *testing.T) {
	crd := crdWith("gadgets.example.com", apiextensionsv1.NamesAccepted)
	crd.Spec.Group = "example.com"
	crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v2", Served: true}, {Name: "v1", Served: true}, {Name: "v0"}}
	crd.Status.AcceptedNames.Plural = "gadgets"
	version := func(name string, resources ...string) apidiscoveryv2.APIVersionDiscovery {
		v := apidiscoveryv2.APIVersionDiscovery{Version: name}
		for _, r := range resources {
			v.Resources = append(v.Resources, apidiscoveryv2.APIResourceDiscovery{Resource: r})
		}
		return v
	}
	group := func(name string, versions ...apidiscoveryv2.APIVersionDiscovery) apidiscoveryv2.APIGroupDiscovery {
		return apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: name}, Versions: versions}
	}
	for _, tc := range []struct {
		name   string
		groups []apidiscoveryv2.APIGroupDiscovery
		want   bool
	}{
		{"every served version", []apidiscoveryv2.APIGroupDiscovery{group("other.com", version("v1", "gadgets")), group("example.com", version("v2", "widgets", "gadgets"), version("v1", "gadgets"))}, true},
		{"no group", []apidiscoveryv2.APIGroupDiscovery{group("other.com", version("v2", "gadgets"), version("v1", "gadgets"))}, false},
		{"one version missing", []apidiscoveryv2.APIGroupDiscovery{group("example.com", version("v2", "gadgets"))}, false},
		{"the resource missing in one version", []apidiscoveryv2.APIGroupDiscovery{group("example.com", version("v2", "gadgets"), version("v1", "widgets"))}, false},
		{"another group's resource", []apidiscoveryv2.APIGroupDiscovery{group("example.com", version("v2", "gadgets")), group("other.com", version("v1", "gadgets"))}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := listed(&apidiscoveryv2.APIGroupDiscoveryList{Items: tc.groups}, crd); got != tc.want {
				t.Errorf("listed = %v, want %v", got, tc.want)
			}
		})
	}
}
