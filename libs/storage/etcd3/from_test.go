package etcd3_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/storage"
)

func setData(v string) storage.UpdateFunc {
	return func(existing runtime.Object) (runtime.Object, error) {
		existing.(*corev1.ConfigMap).Data = map[string]string{"k": v}
		return existing, nil
	}
}

// TestWritesFromACachedState: writes started from a cached state behave
// as writes that read etcd first, whether the state is current or stale.
func TestWritesFromACachedState(t *testing.T) {
	codec, store, keys, ctx := countingStore(t, "/f")
	key := keys.Object("ns", "a")
	create := func(uid string) runtime.Object {
		t.Helper()
		obj, err := store.Create(ctx, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: types.UID(uid)}, Data: map[string]string{"k": "0"}})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	update := func(suggested runtime.Object, pre *storage.Preconditions, f storage.UpdateFunc) *corev1.ConfigMap {
		t.Helper()
		before := suggested.DeepCopyObject()
		out, err := store.GuaranteedUpdateFrom(ctx, key, pre, f, suggested)
		if err != nil {
			t.Fatal(err)
		}
		if !apiequality.Semantic.DeepEqual(before, suggested) {
			t.Fatal("the write changed the cached state")
		}
		return out.(*corev1.ConfigMap)
	}

	current := create("u1")
	decodes := codec.decodes.Load()
	one := update(current, nil, setData("1"))
	if n := codec.decodes.Load() - decodes; n != 1 || one.Data["k"] != "1" {
		t.Fatalf("update from the current state: k=%q after %d decodes, want 1 after 1 (what it wrote)", one.Data["k"], n)
	}

	// current is stale now: the write's compare fails, and it is applied
	// to the latest state.
	if two := update(current, nil, func(existing runtime.Object) (runtime.Object, error) {
		cm := existing.(*corev1.ConfigMap)
		cm.Data["k"] += "+"
		return cm, nil
	}); two.Data["k"] != "1+" {
		t.Fatalf("update from a stale state: k=%q, want 1+ (the latest, changed)", two.Data["k"])
	}

	// What fails on a stale state is tried on the latest before it counts.
	latest, err := store.Get(ctx, key, storage.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantLatest := func(existing runtime.Object) (runtime.Object, error) {
		if existing.(*corev1.ConfigMap).ResourceVersion != latest.(*corev1.ConfigMap).ResourceVersion {
			return nil, storage.NewError(storage.ErrCodeResourceVersionConflicts, key, 0, "stale")
		}
		return setData("3")(existing)
	}
	if three := update(current, nil, wantLatest); three.Data["k"] != "3" {
		t.Fatalf("k=%q, want 3", three.Data["k"])
	}

	// Setting what the stale state holds still writes over the latest.
	rv := latest.(*corev1.ConfigMap).ResourceVersion
	if zero := update(current, nil, setData("0")); zero.Data["k"] != "0" || zero.ResourceVersion == rv {
		t.Fatalf("k=%q at %s, want 0 written", zero.Data["k"], zero.ResourceVersion)
	}

	// The object was deleted and created again: the UID precondition
	// fails on the cached state and holds on the latest.
	if _, err := store.Delete(ctx, key, nil, nil); err != nil {
		t.Fatal(err)
	}
	create("u2")
	u2 := types.UID("u2")
	if four := update(current, &storage.Preconditions{UID: &u2}, setData("4")); four.UID != "u2" || four.Data["k"] != "4" {
		t.Fatalf("update of the new object: %s k=%q", four.UID, four.Data["k"])
	}
	if _, err := store.GuaranteedUpdateFrom(ctx, key, &storage.Preconditions{UID: ptr(types.UID("u1"))}, setData("5"), current); err == nil {
		t.Fatalf("a precondition failing on the latest state too: %v, want it to fail", err)
	}

	// Deletes: from a stale state, and of an object already gone.
	deleted, err := store.DeleteFrom(ctx, key, &storage.Preconditions{UID: &u2}, nil, current)
	if err != nil || deleted.(*corev1.ConfigMap).UID != "u2" {
		t.Fatalf("delete from a stale state: %v, %v", deleted, err)
	}
	if _, err := store.DeleteFrom(ctx, key, nil, nil, current); !storage.IsNotFound(err) {
		t.Fatalf("delete of a deleted object from a stale state: %v, want not found", err)
	}
}

func ptr[T any](v T) *T { return &v }
