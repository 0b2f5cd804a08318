package garbagecollector_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/faultproxy"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/controllers/garbagecollector"
)

const timeout = 30 * time.Second

// env is a test server, clients of it, and ways to start collectors.
type env struct {
	t       *testing.T
	config  *rest.Config
	clients *apiclient.Clients
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e, _ := newEnvServer(t)
	return e
}

func newEnvServer(t *testing.T) (*env, *apitest.Server) {
	t.Helper()
	srv := apitest.Start(t, apitest.Options{})
	clients, err := apiclient.New(srv.Config)
	if err != nil {
		t.Fatalf("clients: %v", err)
	}
	return &env{t: t, config: srv.Config, clients: clients}, srv
}

// startCollector runs a collector until the returned stop is called or
// the test ends; stop waits for Run to return.
// opts follow, and override, the tests' defaults.
func (e *env) startCollector(opts ...garbagecollector.Option) (stop func()) {
	e.t.Helper()
	// Each collector has clients of its own, as a new leader would.
	clients, err := apiclient.New(e.config)
	if err != nil {
		e.t.Fatalf("clients: %v", err)
	}
	c, err := garbagecollector.New(clients, append([]garbagecollector.Option{
		garbagecollector.WithLogger(slog.New(slog.NewTextHandler(testWriter{e.t}, nil))),
		garbagecollector.WithResyncInterval(100 * time.Millisecond),
		garbagecollector.WithSyncTimeout(5 * time.Second),
		garbagecollector.WithRequestTimeout(5 * time.Second),
	}, opts...)...)
	if err != nil {
		e.t.Fatalf("new collector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					e.t.Errorf("run collector: %v", err)
				}
			case <-time.After(timeout):
				e.t.Errorf("collector did not stop within %v", timeout)
			}
		})
	}
	e.t.Cleanup(stop)
	return stop
}

type owner struct {
	apiVersion, kind, name string
	uid                    types.UID
	block                  bool
}

func (o owner) ref() metav1.OwnerReference {
	block := o.block
	return metav1.OwnerReference{APIVersion: o.apiVersion, Kind: o.kind, Name: o.name, UID: o.uid, BlockOwnerDeletion: &block}
}

// blocking returns o as a reference that blocks o's foreground deletion.
func (o owner) blocking() owner {
	o.block = true
	return o
}

func refs(owners []owner) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, o := range owners {
		out = append(out, o.ref())
	}
	return out
}

func (e *env) configMap(ns, name string, finalizers []string, owners ...owner) owner {
	e.t.Helper()
	cm, err := e.clients.Kube.CoreV1().ConfigMaps(ns).Create(context.Background(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: refs(owners), Finalizers: finalizers},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return owner{apiVersion: "v1", kind: "ConfigMap", name: name, uid: cm.UID}
}

func (e *env) widget(ns, name string, finalizers []string, owners ...owner) owner {
	e.t.Helper()
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Widget")
	u.SetName(name)
	u.SetNamespace(ns)
	u.SetOwnerReferences(refs(owners))
	u.SetFinalizers(finalizers)
	w, err := e.clients.Dynamic.Resource(apitest.Widgets).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatalf("create widget %s/%s: %v", ns, name, err)
	}
	return owner{apiVersion: "example.com/v1", kind: "Widget", name: name, uid: w.GetUID()}
}

// object reads an object's metadata; nil when it does not exist.
func (e *env) object(o owner, ns string) *metav1.PartialObjectMetadata {
	e.t.Helper()
	gvr := apitest.ConfigMaps
	if o.kind == "Widget" {
		gvr = apitest.Widgets
	}
	m, err := e.clients.Metadata.Resource(gvr).Namespace(ns).Get(context.Background(), o.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("get %s %s/%s: %v", o.kind, ns, o.name, err)
	}
	return m
}

func (e *env) delete(o owner, ns string, policy metav1.DeletionPropagation) {
	e.t.Helper()
	gvr := apitest.ConfigMaps
	if o.kind == "Widget" {
		gvr = apitest.Widgets
	}
	if err := e.clients.Metadata.Resource(gvr).Namespace(ns).Delete(context.Background(), o.name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		e.t.Fatalf("delete %s %s/%s: %v", o.kind, ns, o.name, err)
	}
}

// removeFinalizers clears o's finalizers, which deletes it when it is
// being deleted.
func (e *env) removeFinalizers(o owner, ns string) {
	e.t.Helper()
	gvr := apitest.ConfigMaps
	if o.kind == "Widget" {
		gvr = apitest.Widgets
	}
	if _, err := e.clients.Metadata.Resource(gvr).Namespace(ns).Patch(context.Background(), o.name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		e.t.Fatalf("remove finalizers of %s %s/%s: %v", o.kind, ns, o.name, err)
	}
}

// eventually polls cond until it holds or the deadline passes.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *env) eventuallyGone(o owner, ns string) {
	e.t.Helper()
	e.eventually(fmt.Sprintf("%s %s/%s to be gone", o.kind, ns, o.name), func() bool { return e.object(o, ns) == nil })
}

func ownerUIDs(m *metav1.PartialObjectMetadata) []types.UID {
	var out []types.UID
	for _, ref := range m.OwnerReferences {
		out = append(out, ref.UID)
	}
	return out
}

func TestBackgroundDeletion(t *testing.T) {
	e := newEnv(t)
	e.startCollector()
	const ns = "bg"
	own := e.configMap(ns, "owner", nil)
	other := e.configMap(ns, "other", nil)
	widget := e.widget(ns, "widget", nil, own)
	cm := e.configMap(ns, "dependent", nil, own)
	shared := e.widget(ns, "shared", nil, own, other)

	e.delete(own, ns, metav1.DeletePropagationBackground)

	e.eventuallyGone(widget, ns)
	e.eventuallyGone(cm, ns)
	e.eventually("the shared dependent to lose only its reference to the deleted owner", func() bool {
		m := e.object(shared, ns)
		return m != nil && slices.Equal(ownerUIDs(m), []types.UID{other.uid})
	})

	// With its last owner gone, the shared dependent goes too.
	e.delete(other, ns, metav1.DeletePropagationBackground)
	e.eventuallyGone(shared, ns)
}

// TestCollectorStartsBeforeTheAPI starts a collector while nothing
// answers at the API's address, as core starts before the gateway: once
// the API answers, it syncs and collects within seconds, not after its
// resync interval.
func TestCollectorStartsBeforeTheAPI(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	addr := faultproxy.UnusedAddr(t)
	cfg := rest.CopyConfig(srv.Config)
	cfg.Host = "http://" + addr
	clients, err := apiclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, config: cfg, clients: clients}
	failed := &discoveryFailures{Handler: slog.NewTextHandler(testWriter{t}, nil)}
	e.startCollector(garbagecollector.WithResyncInterval(time.Hour), garbagecollector.WithLogger(slog.New(failed)))
	e.eventually("the collector to fail its first discovery", func() bool { return failed.n.Load() > 0 })
	faultproxy.Listen(t, addr, strings.TrimPrefix(srv.URL, "http://"))

	const ns = "early"
	own := e.configMap(ns, "owner", nil)
	cm := e.configMap(ns, "dependent", nil, own)
	e.delete(own, ns, metav1.DeletePropagationBackground)
	e.eventuallyGone(cm, ns)
}

// discoveryFailures counts the collector's failed discoveries as it logs
// them.
type discoveryFailures struct {
	slog.Handler
	n atomic.Int32
}

func (h *discoveryFailures) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "discover resources" {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func TestForegroundDeletion(t *testing.T) {
	e := newEnv(t)
	const ns = "fg"
	top := e.configMap(ns, "top", nil)
	middle := e.widget(ns, "middle", nil, top.blocking())
	// The bottom holds a finalizer of its own, so the foreground deletion
	// stops there until the test lets it go.
	bottom := e.configMap(ns, "bottom", []string{"example.com/hold"}, middle.blocking())
	loose := e.widget(ns, "loose", nil, top)
	// The collector starts once the objects exist: the graph learns of
	// each resource from its own watch, so a dependent created just before
	// its owner's deletion may reach it after that deletion, and the owner
	// then looks free of it. kube's collector trusts its graph the same
	// way. What exists at the start is in the graph before any worker runs.
	e.startCollector()

	e.delete(top, ns, metav1.DeletePropagationForeground)

	e.eventually("the bottom of the chain to be deleted", func() bool {
		m := e.object(bottom, ns)
		return m != nil && m.DeletionTimestamp != nil
	})
	e.eventuallyGone(loose, ns)
	for _, o := range []owner{top, middle} {
		m := e.object(o, ns)
		if m == nil || m.DeletionTimestamp == nil || !slices.Contains(m.Finalizers, metav1.FinalizerDeleteDependents) {
			t.Fatalf("%s %s while a blocking dependent exists: %+v, want it waiting with deletionTimestamp and the foregroundDeletion finalizer", o.kind, o.name, m)
		}
	}

	e.removeFinalizers(bottom, ns)
	e.eventuallyGone(bottom, ns)
	e.eventuallyGone(middle, ns)
	e.eventuallyGone(top, ns)
}

func TestOrphan(t *testing.T) {
	e := newEnv(t)
	const ns = "orphan"
	own := e.configMap(ns, "owner", nil)
	other := e.configMap(ns, "other", nil)
	widget := e.widget(ns, "widget", nil, own.blocking())
	cm := e.configMap(ns, "dependent", nil, own, other)
	// Started after the objects, as in TestForegroundDeletion.
	e.startCollector()

	e.delete(own, ns, metav1.DeletePropagationOrphan)
	e.eventuallyGone(own, ns)

	// The finalizer goes only after the references: no waiting here.
	for _, c := range []struct {
		dep  owner
		want []types.UID
	}{
		{dep: widget, want: nil},
		{dep: cm, want: []types.UID{other.uid}},
	} {
		t.Run(c.dep.name, func(t *testing.T) {
			m := e.object(c.dep, ns)
			if m == nil {
				t.Fatalf("orphaned %s %s was deleted", c.dep.kind, c.dep.name)
			}
			if got := ownerUIDs(m); !slices.Equal(got, c.want) {
				t.Errorf("owner references of %s: %v, want %v", c.dep.name, got, c.want)
			}
		})
	}
}

func TestRestartFinishesTheJob(t *testing.T) {
	e := newEnv(t)
	const ns = "restart"
	top := e.configMap(ns, "top", nil)
	held := e.widget(ns, "held", []string{"example.com/hold"}, top.blocking())
	// Started after the objects, as in TestForegroundDeletion.
	stop := e.startCollector()
	e.delete(top, ns, metav1.DeletePropagationForeground)
	e.eventually("the first collector to delete the blocking dependent", func() bool {
		m := e.object(held, ns)
		return m != nil && m.DeletionTimestamp != nil
	})
	stop()

	// While no collector runs: the blocker goes, a background owner goes,
	// an orphaning owner waits.
	e.removeFinalizers(held, ns)
	e.eventuallyGone(held, ns)
	bg := e.configMap(ns, "background", nil)
	bgDependent := e.widget(ns, "background-dependent", nil, bg)
	e.delete(bg, ns, metav1.DeletePropagationBackground)
	orphaner := e.configMap(ns, "orphaner", nil)
	orphan := e.widget(ns, "orphan", nil, orphaner)
	e.delete(orphaner, ns, metav1.DeletePropagationOrphan)
	if m := e.object(top, ns); m == nil {
		t.Fatal("the foreground owner went without a collector")
	}

	e.startCollector()
	e.eventuallyGone(top, ns)
	e.eventuallyGone(bgDependent, ns)
	e.eventuallyGone(orphaner, ns)
	if m := e.object(orphan, ns); m == nil || len(m.OwnerReferences) != 0 {
		t.Errorf("orphan after its owner went: %+v, want it kept without owner references", m)
	}
}

func TestInvalidOwnerReferences(t *testing.T) {
	e := newEnv(t)
	e.startCollector()
	own := e.configMap("a", "owner", nil)
	valid := e.widget("a", "valid", nil, own)
	wrongUID := own
	wrongUID.uid = "00000000-0000-0000-0000-000000000000"
	stale := e.widget("a", "stale-uid", nil, wrongUID)
	// Namespaced owners are looked for in the dependent's namespace only.
	crossNamespace := e.widget("b", "cross-namespace", nil, own)

	e.eventuallyGone(stale, "a")
	e.eventuallyGone(crossNamespace, "b")
	if e.object(own, "a") == nil || e.object(valid, "a") == nil {
		t.Error("the owner or its valid dependent was deleted")
	}
}

// serveConfigMapsOnly has srv serve ConfigMaps and nothing else, and
// returns all the resources it can serve.
func serveConfigMapsOnly(t *testing.T, srv *apitest.Server) []*resource.Resource {
	t.Helper()
	all, err := apitest.Resources(nil)
	if err != nil {
		t.Fatalf("declare resources: %v", err)
	}
	var configMapsOnly []*resource.Resource
	for _, r := range all {
		if r.GroupVersionResource == apitest.ConfigMaps {
			configMapsOnly = append(configMapsOnly, r)
		}
	}
	if err := srv.Server.Replace(configMapsOnly); err != nil {
		t.Fatalf("serve configmaps only: %v", err)
	}
	return all
}

func TestRediscoveryWatchesNewResources(t *testing.T) {
	e, srv := newEnvServer(t)
	all := serveConfigMapsOnly(t, srv)
	e.startCollector()
	const ns = "rediscovery"
	first := e.configMap(ns, "first-owner", nil)
	firstDependent := e.configMap(ns, "first-dependent", nil, first)
	e.delete(first, ns, metav1.DeletePropagationBackground)
	e.eventuallyGone(firstDependent, ns)

	// Widgets appear, as a custom resource of another service would.
	if err := srv.Server.Replace(all); err != nil {
		t.Fatalf("serve widgets too: %v", err)
	}
	e.eventually("widgets to be served", func() bool {
		_, err := e.clients.Dynamic.Resource(apitest.Widgets).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		return err == nil
	})
	own := e.configMap(ns, "owner", nil)
	widget := e.widget(ns, "widget", nil, own)
	e.delete(own, ns, metav1.DeletePropagationBackground)
	e.eventuallyGone(widget, ns)
}

// TestOwnerOfAnUndiscoveredKind gives a ConfigMap an owner of a kind the
// collector has not discovered, as a custom resource created with its
// definition is until the next discovery: the ConfigMap stays, and the
// collector says why at its debug level, as kube's does, not as an error.
func TestOwnerOfAnUndiscoveredKind(t *testing.T) {
	e, srv := newEnvServer(t)
	all := serveConfigMapsOnly(t, srv)
	logged := &undiscoveredKinds{Handler: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})}
	e.startCollector(garbagecollector.WithResyncInterval(time.Hour), garbagecollector.WithLogger(slog.New(logged)))
	e.eventually("the collector to discover ConfigMaps", func() bool { return logged.synced.Load() > 0 })
	if err := srv.Server.Replace(all); err != nil {
		t.Fatalf("serve widgets too: %v", err)
	}
	const ns = "undiscovered"
	own := e.widget(ns, "owner", nil)
	cm := e.configMap(ns, "dependent", nil, own)
	e.eventually("the collector to meet the owner's kind", func() bool { return logged.undiscovered.Load() > 0 })
	if n := logged.errors.Load(); n > 0 {
		t.Errorf("the collector logged %d errors, want none", n)
	}
	if e.object(cm, ns) == nil {
		t.Error("the dependent of an undiscovered owner was deleted")
	}
}

// undiscoveredKinds counts the collector's records of its first sync,
// about owners of kinds it has not discovered, and its errors.
type undiscoveredKinds struct {
	slog.Handler
	synced, undiscovered, errors atomic.Int32
}

func (h *undiscoveredKinds) Handle(ctx context.Context, r slog.Record) error {
	switch r.Message {
	case "garbage collector synced; starting workers":
		h.synced.Add(1)
	case "owner's kind not discovered yet; will retry":
		h.undiscovered.Add(1)
	}
	if r.Level >= slog.LevelError {
		h.errors.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func TestConcurrentReferenceChangesAreKept(t *testing.T) {
	e := newEnv(t)
	e.startCollector()
	const ns = "concurrent"
	gone := e.configMap(ns, "gone", nil)
	kept := e.configMap(ns, "kept", nil)
	dep := e.widget(ns, "dependent", nil, gone, kept)
	var added []owner
	for i := range 20 {
		added = append(added, e.configMap(ns, fmt.Sprintf("added-%d", i), nil))
	}

	e.delete(gone, ns, metav1.DeletePropagationBackground)
	// References appended while the collector removes the dangling one
	// must all survive its patch.
	for _, o := range added {
		body, err := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/ownerReferences/-", "value": o.ref()}})
		if err != nil {
			t.Fatalf("encode patch: %v", err)
		}
		if _, err := e.clients.Dynamic.Resource(apitest.Widgets).Namespace(ns).Patch(context.Background(), dep.name, types.JSONPatchType, body, metav1.PatchOptions{}); err != nil {
			t.Fatalf("add owner %s: %v", o.name, err)
		}
	}
	want := []types.UID{kept.uid}
	for _, o := range added {
		want = append(want, o.uid)
	}
	e.eventually("the dangling reference to go and every other to stay", func() bool {
		m := e.object(dep, ns)
		return m != nil && slices.Equal(ownerUIDs(m), want)
	})
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
