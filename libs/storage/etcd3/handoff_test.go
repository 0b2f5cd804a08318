package etcd3_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
)

// countingCodec counts the objects it decodes.
type countingCodec struct {
	storage.Codec
	decodes atomic.Int32
}

func (c *countingCodec) Decode(data []byte) (runtime.Object, error) {
	c.decodes.Add(1)
	return c.Codec.Decode(data)
}

// countingStore is a store of ConfigMaps on a fresh etcd whose codec
// counts decodes, its keys under prefix, and a context for the test.
func countingStore(t *testing.T, prefix string) (*countingCodec, *etcd3.Store, storage.Keys, context.Context) {
	t.Helper()
	objs := configMaps(t)
	codec := &countingCodec{Codec: objs}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return codec, etcd3.New(etcdtest.Start(t).Client(t), codec, objs.New), storage.NewKeys(prefix, "", "configmaps"), ctx
}

// TestWatchTakesWrittenObjects: a watch gets what the store wrote without
// decoding it again, as copies of its own.
func TestWatchTakesWrittenObjects(t *testing.T) {
	codec, store, keys, ctx := countingStore(t, "/h")
	w, err := store.Watch(ctx, keys.Prefix(), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	key := keys.Object("ns", "a")
	created, err := store.Create(ctx, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"k": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	updated, err := store.GuaranteedUpdate(ctx, key, nil, func(existing runtime.Object) (runtime.Object, error) {
		existing.(*corev1.ConfigMap).Data["k"] = "2"
		return existing, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	deleted, err := store.Delete(ctx, key, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ watch.EventType
		obj runtime.Object
	}{{watch.Added, created}, {watch.Modified, updated}, {watch.Deleted, deleted}} {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("no %s event", want.typ)
		}
		if ev.Type != want.typ || !apiequality.Semantic.DeepEqual(ev.Object, want.obj) {
			t.Fatalf("event %s %#v, want %s %#v", ev.Type, ev.Object, want.typ, want.obj)
		}
		if ev.Object == want.obj {
			t.Fatalf("the %s event shares the object the store returned", ev.Type)
		}
	}
	// The create decodes once, the update reads and decodes what it
	// wrote, the delete reads: the watch decodes nothing.
	if n := codec.decodes.Load(); n != 4 {
		t.Fatalf("%d decodes, want 4", n)
	}
}

// TestWatchTakesDeletedCachedObjects: a delete that starts from a cached
// object reads and decodes nothing, and neither does the watch that sees
// the deletion; a stale cached object is not what the watch gets.
func TestWatchTakesDeletedCachedObjects(t *testing.T) {
	codec, store, keys, ctx := countingStore(t, "/h")
	w, err := store.Watch(ctx, keys.Prefix(), storage.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	next := func(want watch.EventType) watch.Event {
		t.Helper()
		select {
		case ev := <-w.ResultChan():
			if ev.Type != want {
				t.Fatalf("event %s %#v, want %s", ev.Type, ev.Object, want)
			}
			return ev
		case <-ctx.Done():
			t.Fatalf("no %s event", want)
		}
		return watch.Event{}
	}

	// Deleted from the current state: one decode, the create's.
	key := keys.Object("ns", "a")
	created, err := store.Create(ctx, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Data: map[string]string{"k": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	next(watch.Added)
	deleted, err := store.DeleteFrom(ctx, key, nil, nil, created)
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(watch.Deleted); !apiequality.Semantic.DeepEqual(ev.Object, deleted) || ev.Object == deleted {
		t.Fatalf("DELETED %#v, want a copy of %#v", ev.Object, deleted)
	}
	if n := codec.decodes.Load(); n != 1 {
		t.Fatalf("%d decodes, want 1", n)
	}

	// Deleted from a stale state: the delete reads the current one, and
	// the watch reports that, not the stale one.
	key = keys.Object("ns", "b")
	stale, err := store.Create(ctx, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"}, Data: map[string]string{"k": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	next(watch.Added)
	if _, err := store.GuaranteedUpdate(ctx, key, nil, func(existing runtime.Object) (runtime.Object, error) {
		existing.(*corev1.ConfigMap).Data["k"] = "2"
		return existing, nil
	}); err != nil {
		t.Fatal(err)
	}
	next(watch.Modified)
	deleted, err = store.DeleteFrom(ctx, key, nil, nil, stale)
	if err != nil {
		t.Fatal(err)
	}
	ev := next(watch.Deleted)
	if got := ev.Object.(*corev1.ConfigMap).Data["k"]; got != "2" || !apiequality.Semantic.DeepEqual(ev.Object, deleted) {
		t.Fatalf("DELETED %#v, want the updated state %#v", ev.Object, deleted)
	}
}
