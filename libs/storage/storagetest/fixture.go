package storagetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
)

// Fixture is what the suite needs of one implementation under test.
type Fixture struct {
	// Store is the implementation under test; it holds no objects below
	// Keys.Prefix() when the test starts.
	Store storage.Interface
	// Client reaches the etcd behind Store, so the suite can write around
	// the store and read etcd's revision.
	Client *clientv3.Client
	// Keys builds the namespaced keys of the resource; no other fixture's
	// Keys share its prefix.
	Keys storage.Keys
	// Objects makes and encodes the kind's objects.
	Objects resource.Objects
	// New makes each object the suite writes, before it sets the
	// metadata and payload, so a kind with a schema is exercised with
	// content its codec converts and defaults. nil is Objects.New.
	New func() runtime.Object
	// Compact drops the history before rev: etcd's and any the store keeps
	// itself. nil compacts etcd only.
	Compact func(ctx context.Context, rev int64) error
	// Bookmarks says the store sends periodic BOOKMARK events to watches
	// that allow them within a few seconds (for etcd3, a short progress
	// notify interval on the test etcd).
	Bookmarks bool
}

// wait bounds every wait for something that should happen promptly; it is
// only reached when a test fails.
const wait = 5 * time.Second

// valueKey is the annotation that carries a test object's payload, which
// every kind has, typed or not.
const valueKey = "storagetest.kplane.dev/value"

// env is one test's fixture with helpers that fail the test on error.
type env struct {
	t   *testing.T
	f   Fixture
	ctx context.Context
}

func newEnv(t *testing.T, newFixture func(t *testing.T) Fixture) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return &env{t: t, f: newFixture(t), ctx: ctx}
}

func (e *env) key(ns, name string) string { return e.f.Keys.Object(ns, name) }

// object returns a new object of the kind; labels may be nil.
func (e *env) object(ns, name string, labels map[string]string, value string) runtime.Object {
	e.t.Helper()
	newObj := e.f.Objects.New
	if e.f.New != nil {
		newObj = e.f.New
	}
	obj := newObj()
	m := accessor(e.t, obj)
	m.SetNamespace(ns)
	m.SetName(name)
	m.SetLabels(labels)
	m.SetAnnotations(map[string]string{valueKey: value})
	return obj
}

func (e *env) create(ns, name string, labels map[string]string, value string) runtime.Object {
	e.t.Helper()
	out, err := e.f.Store.Create(e.ctx, e.key(ns, name), e.object(ns, name, labels, value))
	if err != nil {
		e.t.Fatalf("create %s/%s: %v", ns, name, err)
	}
	return out
}

// set changes an object's payload and labels through the store.
func (e *env) set(ns, name string, labels map[string]string, value string) runtime.Object {
	e.t.Helper()
	out, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key(ns, name), nil, func(existing runtime.Object) (runtime.Object, error) {
		m := accessor(e.t, existing)
		m.SetLabels(labels)
		m.SetAnnotations(map[string]string{valueKey: value})
		return existing, nil
	})
	if err != nil {
		e.t.Fatalf("update %s/%s: %v", ns, name, err)
	}
	return out
}

func (e *env) delete(ns, name string) runtime.Object {
	e.t.Helper()
	out, err := e.f.Store.Delete(e.ctx, e.key(ns, name), nil, nil)
	if err != nil {
		e.t.Fatalf("delete %s/%s: %v", ns, name, err)
	}
	return out
}

func (e *env) get(ns, name string) runtime.Object {
	e.t.Helper()
	out, err := e.f.Store.Get(e.ctx, e.key(ns, name), storage.GetOptions{})
	if err != nil {
		e.t.Fatalf("get %s/%s: %v", ns, name, err)
	}
	return out
}

func (e *env) list(prefix string, opts storage.ListOptions) *storage.ListResult {
	e.t.Helper()
	res, err := e.f.Store.List(e.ctx, prefix, opts)
	if err != nil {
		e.t.Fatalf("list %s: %v", prefix, err)
	}
	return res
}

// etcdRev reads etcd's current revision around the store.
func (e *env) etcdRev() int64 {
	e.t.Helper()
	resp, err := e.f.Client.Get(e.ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		e.t.Fatalf("read etcd revision: %v", err)
	}
	return resp.Header.Revision
}

func (e *env) compact(rev int64) {
	e.t.Helper()
	var err error
	if e.f.Compact != nil {
		err = e.f.Compact(e.ctx, rev)
	} else {
		_, err = e.f.Client.Compact(e.ctx, rev, clientv3.WithCompactPhysical())
	}
	if err != nil {
		e.t.Fatalf("compact to %d: %v", rev, err)
	}
}

func (e *env) watch(prefix string, opts storage.WatchOptions) watch.Interface {
	e.t.Helper()
	w, err := e.f.Store.Watch(e.ctx, prefix, opts)
	if err != nil {
		e.t.Fatalf("watch %s: %v", prefix, err)
	}
	e.t.Cleanup(w.Stop)
	return w
}

func accessor(t *testing.T, obj runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatalf("object metadata: %v", err)
	}
	return m
}

func rvOf(t *testing.T, obj runtime.Object) int64 {
	t.Helper()
	s := accessor(t, obj).GetResourceVersion()
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q of %s is not a revision", s, accessor(t, obj).GetName())
	}
	return rv
}

func valueOf(t *testing.T, obj runtime.Object) string {
	t.Helper()
	return accessor(t, obj).GetAnnotations()[valueKey]
}

func names(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, accessor(t, o).GetName())
	}
	return out
}

func wantCode(t *testing.T, err error, code storage.ErrorCode, doing string) {
	t.Helper()
	if got := storage.CodeOf(err); got != code {
		t.Fatalf("%s: err = %v (code %v), want %v", doing, err, got, code)
	}
}

// next returns the watch's next event, failing the test when none comes.
func next(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed, want an event")
		}
		return ev
	case <-time.After(wait):
		t.Fatalf("no watch event within %v", wait)
	}
	return watch.Event{}
}

// nextChange skips bookmarks.
func nextChange(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	for {
		if ev := next(t, w); ev.Type != watch.Bookmark {
			return ev
		}
	}
}

type wantEvent struct {
	typ   watch.EventType
	name  string
	rv    int64 // 0: any
	value string
}

func expectEvents(t *testing.T, w watch.Interface, want ...wantEvent) {
	t.Helper()
	for i, we := range want {
		ev := nextChange(t, w)
		if ev.Type == watch.Error {
			t.Fatalf("event %d: error %v", i, ev.Object)
		}
		got := wantEvent{typ: ev.Type, name: accessor(t, ev.Object).GetName(), rv: rvOf(t, ev.Object), value: valueOf(t, ev.Object)}
		if we.rv == 0 {
			got.rv = 0
		}
		if got != we {
			t.Fatalf("event %d = %+v, want %+v", i, got, we)
		}
	}
}

// expectClosed waits for the result channel to close, allowing bookmarks.
func expectClosed(t *testing.T, w watch.Interface) {
	t.Helper()
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				return
			}
			if ev.Type != watch.Bookmark {
				t.Fatalf("got %s event, want the watch closed", ev.Type)
			}
		case <-deadline:
			t.Fatalf("watch not closed within %v", wait)
		}
	}
}

// expectNoChangeBefore checks that no change arrives before a marker
// object (which the watch must match) is written and seen, proving what the
// watch filtered out.
func (e *env) expectNoChangeBefore(w watch.Interface, markerNS, markerName string, labels map[string]string) {
	e.t.Helper()
	e.create(markerNS, markerName, labels, "marker")
	ev := nextChange(e.t, w)
	if name := accessor(e.t, ev.Object).GetName(); ev.Type != watch.Added || name != markerName {
		e.t.Fatalf("got %s %s, want only the marker ADDED %s", ev.Type, name, markerName)
	}
}

var errTryUpdate = errors.New("storagetest: tryUpdate refused")

func conflict(key string, want, got string) error {
	return storage.NewError(storage.ErrCodeResourceVersionConflicts, key, 0, fmt.Sprintf("resourceVersion %s is stale, object is at %s", want, got))
}
