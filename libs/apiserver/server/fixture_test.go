package server_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	restclient "k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
)

// wait bounds every wait for something that should happen promptly; it is
// only reached when a test fails.
const wait = 10 * time.Second

var (
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	widgetsGVR    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	// now is the fixture clock's time; objects are created a minute before.
	now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
)

// storeKind names the store implementations the server is tested with.
type storeKind string

const (
	direct storeKind = "etcd"
	cached storeKind = "watchcache"
)

var storeKinds = []storeKind{direct, cached}

// fixture is a server for configmaps (typed) and widgets.example.com
// (unstructured, with /status) on a real etcd, served over HTTP.
type fixture struct {
	t    testing.TB
	ctx  context.Context
	url  string
	srv  *server.Server
	etcd *clientv3.Client
	// prefix is where the server's keys start in etcd.
	prefix string
	config *restclient.Config
	// stores holds each resource's store as the server built it.
	mu     sync.Mutex
	stores map[schema.GroupVersionResource]*countingStore
	keys   map[schema.GroupVersionResource]storage.Keys
	res    []*resource.Resource
}

func newFixture(t testing.TB, kind storeKind, extra ...server.Routes) *fixture {
	t.Helper()
	return newFixtureOf(t, kind, resources(t), extra...)
}

// newFixtureOf is a fixture serving res.
func newFixtureOf(t testing.TB, kind storeKind, res []*resource.Resource, extra ...server.Routes) *fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	etcd := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
	client := etcd.Client(t)
	f := &fixture{t: t, ctx: ctx, etcd: client, stores: map[schema.GroupVersionResource]*countingStore{}, keys: map[schema.GroupVersionResource]storage.Keys{}}
	f.res = res

	prefix := fmt.Sprintf("/%s", t.Name())
	f.prefix = prefix
	base := server.EtcdStores(client, prefix, nil)
	if kind == cached {
		base = server.CachedEtcdStores(client, prefix, nil, nil, cacher.WithBookmarkInterval(100*time.Millisecond))
	}
	stores := func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
		s, k, err := base(r)
		if err != nil {
			return nil, k, err
		}
		cs := &countingStore{Interface: s}
		f.mu.Lock()
		f.stores[r.GroupVersionResource], f.keys[r.GroupVersionResource] = cs, k
		f.mu.Unlock()
		return cs, k, nil
	}
	opts := server.Options{
		Resources: f.res,
		Stores:    stores,
		Routes:    extra,
		HandlerOptions: []rest.Option{
			rest.WithClock(clocktesting.NewFakePassiveClock(now)),
		},
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run server: %v", err)
		}
	})
	f.url, f.srv = hs.URL, srv
	f.config = &restclient.Config{Host: hs.URL, QPS: -1}
	return f
}

func resources(t testing.TB) []*resource.Resource {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	cmObjects, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatal(err)
	}
	size, err := resource.NewJSONPathCell(".spec.size", "integer", nil)
	if err != nil {
		t.Fatal(err)
	}
	return []*resource.Resource{
		{
			GroupVersionResource: configMapsGVR,
			Kind:                 "ConfigMap",
			Singular:             "configmap",
			Namespaced:           true,
			ShortNames:           []string{"cm"},
			Objects:              cmObjects,
			Columns: []resource.Column{
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Data", Type: "string"}, Cell: dataCount{}},
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string"}, Cell: resource.AgeCell{Clock: clocktesting.NewFakePassiveClock(now)}},
			},
		},
		{
			GroupVersionResource: widgetsGVR,
			Kind:                 "Widget",
			Singular:             "widget",
			Namespaced:           true,
			Subresources:         resource.Subresources{Status: true},
			Objects:              objects.NewUnstructured(widgetsGVR.GroupVersion().WithKind("Widget"), "WidgetList"),
			Columns: []resource.Column{
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Size", Type: "integer"}, Cell: size},
			},
		},
	}
}

// dataCount is the DATA column of kube's configmap printer.
type dataCount struct{}

func (dataCount) Value(obj runtime.Object) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("not a configmap: %T", obj)
	}
	return int64(len(cm.Data) + len(cm.BinaryData)), nil
}

// store returns the store the server built for gvr.
func (f *fixture) store(gvr schema.GroupVersionResource) (*countingStore, storage.Keys) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stores[gvr], f.keys[gvr]
}

// seedConfigMap writes a configmap straight to storage and returns it as
// stored.
func (f *fixture) seedConfigMap(ns, name string, labels map[string]string, data map[string]string) *corev1.ConfigMap {
	f.t.Helper()
	s, k := f.store(configMapsGVR)
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Labels: labels,
			UID:               types.UID("uid-" + ns + "-" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
		},
		Data: data,
	}
	out, err := s.Create(f.ctx, k.Object(ns, name), cm)
	if err != nil {
		f.t.Fatalf("seed configmap %s/%s: %v", ns, name, err)
	}
	return out.(*corev1.ConfigMap)
}

func (f *fixture) seedWidget(ns, name string, size int64) *unstructured.Unstructured {
	f.t.Helper()
	s, k := f.store(widgetsGVR)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name, "namespace": ns, "uid": "uid-" + name, "creationTimestamp": now.Add(-time.Hour).Format(time.RFC3339)},
		"spec":     map[string]any{"size": size},
	}}
	out, err := s.Create(f.ctx, k.Object(ns, name), u)
	if err != nil {
		f.t.Fatalf("seed widget %s/%s: %v", ns, name, err)
	}
	return out.(*unstructured.Unstructured)
}

func (f *fixture) typed() kubernetes.Interface {
	f.t.Helper()
	cs, err := kubernetes.NewForConfig(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

func (f *fixture) dynamic() dynamic.Interface {
	f.t.Helper()
	c, err := dynamic.NewForConfig(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *fixture) metadata() metadata.Interface {
	f.t.Helper()
	c, err := metadata.NewForConfig(f.config)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// countingStore counts the watches it has open, so a test can see the
// server stop every watch it started.
type countingStore struct {
	storage.Interface
	open atomic.Int64
}

func (c *countingStore) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	w, err := c.Interface.Watch(ctx, prefix, opts)
	if err != nil {
		return nil, err
	}
	c.open.Add(1)
	return &countedWatch{Interface: w, open: &c.open}, nil
}

// Run runs the store beneath when it runs (a watch cache).
func (c *countingStore) Run(ctx context.Context) {
	if r, ok := c.Interface.(interface{ Run(context.Context) }); ok {
		r.Run(ctx)
	}
}

type countedWatch struct {
	watch.Interface
	once sync.Once
	open *atomic.Int64
}

func (w *countedWatch) Stop() {
	w.Interface.Stop()
	w.once.Do(func() { w.open.Add(-1) })
}

// eventually polls cond until it holds or the wait runs out.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func rvOf(t testing.TB, obj runtime.Object) string {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m.GetResourceVersion()
}
