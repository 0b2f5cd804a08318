package params

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	"kplane.dev/services/admission/internal/policy/validating"
)

var (
	configMapKind = schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	configMaps    = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	limitKind     = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Limit"}
	limits        = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "limits"}
	lateKind      = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Late"}
)

// fakeDiscovery is a RESTMapper that learns the Late kind, as if its CRD
// had just been created, when it is reset.
type fakeDiscovery struct {
	mu     sync.Mutex
	m      *meta.DefaultRESTMapper
	resets int
}

func newDiscovery() *fakeDiscovery {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(configMapKind, meta.RESTScopeNamespace)
	m.Add(limitKind, meta.RESTScopeRoot)
	return &fakeDiscovery{m: m}
}

func (d *fakeDiscovery) RESTMappingWithContext(_ context.Context, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m.RESTMapping(gk, versions...)
}

func (d *fakeDiscovery) ResetWithContext(context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resets++
	d.m.Add(lateKind, meta.RESTScopeRoot)
}

func obj(gvk schema.GroupVersionKind, namespace, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"k": name}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

func newFake(objects ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		configMaps: "ConfigMapList",
		limits:     "LimitList",
		{Group: "example.com", Version: "v1", Resource: "lates"}: "LateList",
	}, objects...)
}

// run runs p until the test ends and checks that Run returns.
func run(t *testing.T, p *Params) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after its context ended")
		}
	})
	// Run has started once it refuses a second start.
	for {
		p.mu.Lock()
		running := p.ctx != nil
		p.mu.Unlock()
		if running {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestNamespaced(t *testing.T) {
	d := newDiscovery()
	p := newParams(newFake(), d, quiet())
	ctx := context.Background()
	if ns, err := p.Namespaced(ctx, configMapKind); err != nil || !ns {
		t.Errorf("ConfigMap namespaced %v, %v; want true", ns, err)
	}
	if ns, err := p.Namespaced(ctx, limitKind); err != nil || ns {
		t.Errorf("Limit namespaced %v, %v; want false", ns, err)
	}
	// A kind not known is looked for again in a fresh discovery.
	if _, err := p.Namespaced(ctx, lateKind); err != nil {
		t.Errorf("a kind created after start: %v", err)
	}
	if d.resets != 1 {
		t.Errorf("%d discovery resets, want 1", d.resets)
	}
	gone := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gone"}
	if _, err := p.Namespaced(ctx, gone); !errors.Is(err, validating.ErrKindUnknown) {
		t.Errorf("unknown kind: %v, want ErrKindUnknown", err)
	}
	// Discovery is read again at most once a second.
	if d.resets != 1 {
		t.Errorf("%d discovery resets within a second, want 1", d.resets)
	}
	now := time.Now().Add(resetInterval)
	p.now = func() time.Time { return now }
	if _, err := p.Namespaced(ctx, gone); !errors.Is(err, validating.ErrKindUnknown) {
		t.Errorf("unknown kind: %v, want ErrKindUnknown", err)
	}
	if d.resets != 2 {
		t.Errorf("%d discovery resets a second later, want 2", d.resets)
	}
}

func TestGetAndList(t *testing.T) {
	p := newParams(newFake(
		obj(configMapKind, "default", "a", map[string]string{"tier": "x"}),
		obj(configMapKind, "default", "b", map[string]string{"tier": "y"}),
		obj(configMapKind, "other", "a", map[string]string{"tier": "x"}),
		obj(limitKind, "", "cluster", nil),
	), newDiscovery(), quiet())
	ctx := context.Background()
	if _, err := p.Get(ctx, configMapKind, "default", "a"); !errors.Is(err, validating.ErrNotSynced) {
		t.Fatalf("Get before Run: %v, want ErrNotSynced", err)
	}
	run(t, p)

	got, err := p.Get(ctx, configMapKind, "other", "a")
	if err != nil {
		t.Fatal(err)
	}
	if u := got.(*unstructured.Unstructured); u.GetNamespace() != "other" || u.GetKind() != "ConfigMap" {
		t.Errorf("got %s/%s of kind %q", u.GetNamespace(), u.GetName(), u.GetKind())
	}
	if _, err := p.Get(ctx, configMapKind, "default", "missing"); !apierrors.IsNotFound(err) {
		t.Errorf("missing param: %v, want NotFound", err)
	}
	if _, err := p.Get(ctx, limitKind, "", "cluster"); err != nil {
		t.Errorf("cluster-scoped param: %v", err)
	}
	list, err := p.List(ctx, configMapKind, "default", labels.SelectorFromSet(labels.Set{"tier": "x"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].(*unstructured.Unstructured).GetName() != "a" {
		t.Errorf("selected %d params, want default/a", len(list))
	}
	list, err = p.List(ctx, configMapKind, "default", labels.Everything())
	if err != nil || len(list) != 2 {
		t.Errorf("listed %d params in default (%v), want 2", len(list), err)
	}
	if _, err := p.List(ctx, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gone"}, "", labels.Everything()); !errors.Is(err, validating.ErrKindUnknown) {
		t.Errorf("unknown kind: %v, want ErrKindUnknown", err)
	}

	p.mu.Lock()
	n := len(p.informers)
	p.mu.Unlock()
	if n != 2 {
		t.Errorf("%d informers for two kinds", n)
	}
}

// TestGetJustCreated: a param created after the informer synced is found,
// from the informer or, before it has seen it, from the API server.
func TestGetJustCreated(t *testing.T) {
	client := newFake(obj(configMapKind, "default", "a", nil))
	// The informer lists but hears no events after.
	client.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) { return true, watch.NewFake(), nil })
	p := newParams(client, newDiscovery(), quiet())
	run(t, p)
	ctx := context.Background()
	if _, err := p.Get(ctx, configMapKind, "default", "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(configMaps).Namespace("default").Create(ctx, obj(configMapKind, "default", "new", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, configMapKind, "default", "new"); err != nil {
		t.Errorf("param created just before: %v", err)
	}
	if _, err := p.Get(ctx, configMapKind, "default", "never"); !apierrors.IsNotFound(err) {
		t.Errorf("missing param: %v, want NotFound", err)
	}
}

// TestNotSynced: a kind whose informer cannot list is not yet synced
// after kube's second of waiting.
func TestNotSynced(t *testing.T) {
	client := newFake()
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	client.PrependReactor("list", "limits", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-block
		return true, nil, errors.New("unavailable")
	})
	p := newParams(client, newDiscovery(), quiet())
	run(t, p)
	start := time.Now()
	_, err := p.Get(context.Background(), limitKind, "", "cluster")
	if !errors.Is(err, validating.ErrNotSynced) {
		t.Fatalf("unsynced kind: %v, want ErrNotSynced", err)
	}
	if waited := time.Since(start); waited < syncWait/2 || waited > 5*syncWait {
		t.Errorf("waited %v for the informer, want about %v", waited, syncWait)
	}
}

// TestIdleInformerStops: an informer nobody asked for ten minutes stops,
// and the next request starts another.
func TestIdleInformerStops(t *testing.T) {
	p := newParams(newFake(obj(configMapKind, "default", "a", nil)), newDiscovery(), quiet())
	now := time.Now()
	var mu sync.Mutex
	p.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	run(t, p)
	ctx := context.Background()
	if _, err := p.Get(ctx, configMapKind, "default", "a"); err != nil {
		t.Fatal(err)
	}
	count := func() int { p.mu.Lock(); defer p.mu.Unlock(); return len(p.informers) }
	p.sweep()
	if count() != 1 {
		t.Fatal("a busy informer was stopped")
	}
	mu.Lock()
	now = now.Add(idleAfter + time.Second)
	mu.Unlock()
	p.sweep()
	if count() != 0 {
		t.Fatal("an idle informer runs on")
	}
	if _, err := p.Get(ctx, configMapKind, "default", "a"); err != nil {
		t.Fatal(err)
	}
	if count() != 1 {
		t.Error("no informer restarted")
	}
}
