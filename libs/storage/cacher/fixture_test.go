package cacher_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/cacher/cachertest"
	"kplane.dev/libs/storage/etcd3"
)

// wait bounds waits for what should happen promptly; only a failing test
// reaches it.
const wait = 10 * time.Second

// spyStore is the real etcd3 store with a window on the cacher's use of
// it: it counts lists, gets and progress requests, and lets a test cut the cacher's underlying watch and
// hold back the next one.
type spyStore struct {
	*etcd3.Store
	lists, gets, progress atomic.Int64

	mu      sync.Mutex
	watches []watch.Interface
	gate    chan struct{}
}

func (s *spyStore) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	s.lists.Add(1)
	return s.Store.List(ctx, prefix, opts)
}

func (s *spyStore) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, key, opts)
}

func (s *spyStore) RequestWatchProgress(ctx context.Context) error {
	s.progress.Add(1)
	return s.Store.RequestWatchProgress(ctx)
}

func (s *spyStore) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	s.mu.Lock()
	gate := s.gate
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	w, err := s.Store.Watch(ctx, prefix, opts)
	if err == nil {
		s.mu.Lock()
		s.watches = append(s.watches, w)
		s.mu.Unlock()
	}
	return w, err
}

// cut stops every watch opened so far and holds back new ones until
// release is called.
func (s *spyStore) cut() (release func()) {
	gate := make(chan struct{})
	s.mu.Lock()
	s.gate = gate
	ws := s.watches
	s.watches = nil
	s.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
	return func() {
		s.mu.Lock()
		s.gate = nil
		s.mu.Unlock()
		close(gate)
	}
}

type fixture struct {
	t      testing.TB
	ctx    context.Context
	etcd   *etcdtest.Server
	client *clientv3.Client
	store  *spyStore
	cacher *cacher.Cacher
	keys   storage.Keys
	objs   *objects.Typed
}

func newObjects(t testing.TB) *objects.Typed {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatalf("register core/v1: %v", err)
	}
	objs, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatalf("configmap objects: %v", err)
	}
	return objs
}

// newFixture starts etcd and a running cacher of configmaps over it; the
// cacher's goroutine stops and is waited for when the test ends.
func newFixture(t testing.TB, etcdOpts []etcdtest.Option, opts ...cacher.Option) *fixture {
	t.Helper()
	srv := etcdtest.Start(t, etcdOpts...)
	client := srv.Client(t)
	objs := newObjects(t)
	keys := storage.NewKeys("/kplane", "", "configmaps")
	spy := &spyStore{Store: etcd3.New(client, objs, objs.New)}
	opts = append([]cacher.Option{cacher.WithRetryInterval(10 * time.Millisecond)}, opts...)
	c := cachertest.Run(t, spy, objs.New, keys.Prefix(), opts...)
	tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(tcancel)
	return &fixture{t: t, ctx: tctx, etcd: srv, client: client, store: spy, cacher: c, keys: keys, objs: objs}
}

func configMap(ns, name string, labels map[string]string, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Data:       map[string]string{"v": value},
	}
}

func (f *fixture) create(ns, name string, labels map[string]string, value string) int64 {
	f.t.Helper()
	out, err := f.cacher.Create(f.ctx, f.keys.Object(ns, name), configMap(ns, name, labels, value))
	if err != nil {
		f.t.Fatalf("create %s/%s: %v", ns, name, err)
	}
	return rvOf(f.t, out)
}

func (f *fixture) update(ns, name string, labels map[string]string, value string) int64 {
	f.t.Helper()
	out, err := f.cacher.GuaranteedUpdate(f.ctx, f.keys.Object(ns, name), nil, func(existing runtime.Object) (runtime.Object, error) {
		cm := existing.(*corev1.ConfigMap)
		cm.Labels = labels
		cm.Data = map[string]string{"v": value}
		return cm, nil
	})
	if err != nil {
		f.t.Fatalf("update %s/%s: %v", ns, name, err)
	}
	return rvOf(f.t, out)
}

func (f *fixture) delete(ns, name string) int64 {
	f.t.Helper()
	out, err := f.cacher.Delete(f.ctx, f.keys.Object(ns, name), nil, nil)
	if err != nil {
		f.t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
	return rvOf(f.t, out)
}

// synced waits until the cache has seen rv, which a list at rv does, even
// with a cacher whose own wait is short.
func (f *fixture) synced(rv int64) {
	f.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		_, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10)})
		if err == nil {
			return
		}
		if storage.CodeOf(err) != storage.ErrCodeTooLargeResourceVersion || time.Now().After(deadline) {
			f.t.Fatalf("wait for the cache to reach %d: %v", rv, err)
		}
	}
}

// etcdRev writes a key outside the resource, so etcd's revision moves while
// the resource stays idle, and returns the new revision.
func (f *fixture) bumpEtcd() int64 {
	f.t.Helper()
	resp, err := f.client.Put(f.ctx, "/elsewhere", "x")
	if err != nil {
		f.t.Fatalf("write outside the resource: %v", err)
	}
	return resp.Header.Revision
}

func (f *fixture) watch(prefix string, opts storage.WatchOptions) watch.Interface {
	f.t.Helper()
	w, err := f.cacher.Watch(f.ctx, prefix, opts)
	if err != nil {
		f.t.Fatalf("watch %s: %v", prefix, err)
	}
	f.t.Cleanup(w.Stop)
	return w
}

func rvOf(t testing.TB, obj runtime.Object) int64 {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("object metadata: %v", err)
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q: %v", m.GetResourceVersion(), err)
	}
	return rv
}

// next returns the next event that is not a bookmark.
func next(t testing.TB, w watch.Interface) watch.Event {
	t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed, want an event")
			}
			if ev.Type != watch.Bookmark {
				return ev
			}
		case <-timeout:
			t.Fatalf("no watch event within %v", wait)
		}
	}
}

// got is what a test checks of an event.
type got struct {
	typ   watch.EventType
	name  string
	value string
	rv    int64
}

func describe(t testing.TB, ev watch.Event) got {
	t.Helper()
	cm, ok := ev.Object.(*corev1.ConfigMap)
	if !ok {
		t.Fatalf("%s event carries %T, want a ConfigMap: %v", ev.Type, ev.Object, ev.Object)
	}
	return got{typ: ev.Type, name: cm.Name, value: cm.Data["v"], rv: rvOf(t, cm)}
}

func expect(t testing.TB, w watch.Interface, want ...got) {
	t.Helper()
	for i, wnt := range want {
		g := describe(t, next(t, w))
		if g != wnt {
			t.Fatalf("event %d = %+v, want %+v", i, g, wnt)
		}
	}
}

// expectClosed drains w until it closes and returns the non-bookmark
// events it delivered on the way.
func expectClosed(t testing.TB, w watch.Interface) []watch.Event {
	t.Helper()
	var out []watch.Event
	timeout := time.After(wait)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return out
			}
			if ev.Type != watch.Bookmark {
				out = append(out, ev)
			}
		case <-timeout:
			t.Fatalf("watch not closed within %v", wait)
		}
	}
}

// watchListOf creates n objects, o000 on, waits for the cache to hold
// them and opens a watch-list; it returns the initial events the watch
// is to send, the objects in key order.
func (f *fixture) watchListOf(n int) ([]got, watch.Interface) {
	f.t.Helper()
	var initial []got
	for i := range n {
		name := fmt.Sprintf("o%03d", i)
		initial = append(initial, got{watch.Added, name, "", f.create("ns", name, nil, "")})
	}
	f.synced(initial[n-1].rv)
	yes := true
	return initial, f.watch(f.keys.Prefix(), storage.WatchOptions{
		SendInitialEvents:    &yes,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowBookmarks:       true,
	})
}
