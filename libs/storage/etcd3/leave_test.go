package etcd3_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
)

// TestWritesLeaveTheirObjectsAlone: the store writes an object without
// its resourceVersion but never writes to the object it was given, which
// may be a cache's that others read, typed or not; nor to a cached state
// a delete starts from.
func TestWritesLeaveTheirObjectsAlone(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	kinds := []struct {
		name    string
		objects resource.Objects
		object  func(data string) runtime.Object
	}{
		{"typed", configMaps(t), func(data string) runtime.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", Labels: map[string]string{"l": "v"}}, Data: map[string]string{"k": data}}
		}},
		{"unstructured", widgets(), func(data string) runtime.Object {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/v1", "kind": "Widget",
				"metadata": map[string]any{"namespace": "ns", "name": "a", "labels": map[string]any{"l": "v"}},
				"spec":     map[string]any{"k": data},
			}}
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			store := etcd3.New(client, k.objects, k.objects.New)
			key := storage.NewKeys("/"+k.name, "", "things").Object("ns", "a")
			created, err := store.Create(ctx, key, k.object("1"))
			if err != nil {
				t.Fatal(err)
			}
			rv := resourceVersion(t, created)

			// What tryUpdate returns carries the resourceVersion it
			// started from, as every update's object does.
			var returned, before runtime.Object
			updated, err := store.GuaranteedUpdateFrom(ctx, key, nil, func(existing runtime.Object) (runtime.Object, error) {
				returned = k.object("2")
				setResourceVersion(t, returned, resourceVersion(t, existing))
				before = returned.DeepCopyObject()
				return returned, nil
			}, created)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(before, returned) {
				t.Fatalf("the update changed the object tryUpdate returned:\n%#v\nwant\n%#v", returned, before)
			}
			if got := resourceVersion(t, updated); got == rv || got == "" {
				t.Fatalf("updated at %q, want a resourceVersion after %s", got, rv)
			}
			resp, err := client.Get(ctx, key)
			if err != nil || len(resp.Kvs) != 1 {
				t.Fatalf("read %s: %v", key, err)
			}
			stored, err := k.objects.Decode(resp.Kvs[0].Value)
			if err != nil {
				t.Fatal(err)
			}
			if got := resourceVersion(t, stored); got != "" {
				t.Fatalf("stored with resourceVersion %q, want none", got)
			}

			cached := updated.DeepCopyObject()
			deleted, err := store.DeleteFrom(ctx, key, nil, nil, updated)
			if err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(cached, updated) {
				t.Fatal("the delete changed the cached state it started from")
			}
			if got := resourceVersion(t, deleted); got == resourceVersion(t, updated) {
				t.Fatalf("deleted at %q, the update's resourceVersion", got)
			}
		})
	}
}

func resourceVersion(t *testing.T, obj runtime.Object) string {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m.GetResourceVersion()
}

func setResourceVersion(t *testing.T, obj runtime.Object, rv string) {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	m.SetResourceVersion(rv)
}
