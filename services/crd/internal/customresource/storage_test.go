package customresource_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/cacher/cachertest"
	"kplane.dev/libs/storage/etcd3"
	"kplane.dev/libs/storage/storagetest"
)

// stores are the two storage.Interface implementations a custom
// resource is served from.
var stores = []struct {
	name string
	// new returns a store for prefix; compact drops its history too.
	new func(t *testing.T, client *clientv3.Client, o resource.Objects, prefix string) (s storage.Interface, compact func(ctx context.Context, rev int64) error)
}{
	{name: "etcd3", new: func(t *testing.T, client *clientv3.Client, o resource.Objects, _ string) (storage.Interface, func(context.Context, int64) error) {
		return etcd3.New(client, o, o.New), nil
	}},
	{name: "cacher", new: func(t *testing.T, client *clientv3.Client, o resource.Objects, prefix string) (storage.Interface, func(context.Context, int64) error) {
		c := cachertest.Run(t, etcd3.New(client, o, o.New), o.New, prefix, cacher.WithBookmarkInterval(100*time.Millisecond), cacher.WithWaitTimeout(time.Second))
		return c, func(ctx context.Context, rev int64) error {
			if _, err := client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
				return err
			}
			c.Compact(rev)
			return nil
		}
	}},
}

// TestConformance runs the storage suite with a custom resource's codec,
// for the storage version and for a served version its objects are
// converted from, with objects whose spec the codec defaults on read.
func TestConformance(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	for _, st := range stores {
		for _, version := range []string{"v1", "v2"} {
			t.Run(st.name+"/"+version, func(t *testing.T) {
				o, strategy := rs[version].Objects, rs[version].Strategy
				srv := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
				client := srv.Client(t)
				n := 0
				storagetest.RunConformance(t, func(t *testing.T) storagetest.Fixture {
					n++
					keys := storage.NewKeys(fmt.Sprintf("/t%d", n), "example.com", "widgets")
					s, compact := st.new(t, client, o, keys.Prefix())
					return storagetest.Fixture{
						Store:   s,
						Client:  client,
						Keys:    keys,
						Objects: o,
						New: func() runtime.Object {
							u := o.New().(*unstructured.Unstructured)
							u.Object["spec"] = map[string]any{
								"port":     "http",
								"ports":    []any{map[string]any{"name": "http", "port": int64(80)}, map[string]any{"name": "https", "port": int64(443)}},
								"template": map[string]any{"labels": map[string]any{"app": "web"}},
							}
							// The REST layer stores objects defaulted; one
							// stored without its defaults reads back with
							// them and so differs from what a no-op update
							// would write (TestStoredObjectRead reads one).
							strategy.PrepareForCreate(context.Background(), u)
							return u
						},
						Compact:   compact,
						Bookmarks: true,
					}
				})
			})
		}
	}
}

// TestStoredObjectRead reads an object written around the store, in the
// storage version without its defaults, through each served version:
// each sees it in its own apiVersion with the defaults applied, and the
// stored bytes keep no trace of either.
func TestStoredObjectRead(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	srv := etcdtest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	keys := storage.NewKeys("/read", "example.com", "widgets")
	key := keys.Object("ns", "w")

	raw := objects.NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
	stored := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "ns"},
		"spec":       map[string]any{"replicas": int64(2), "port": int64(8080), "template": map[string]any{}},
	}}
	data, err := raw.Encode(stored)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Put(ctx, key, string(data)); err != nil {
		t.Fatal(err)
	}

	for _, st := range stores {
		for _, version := range []string{"v1", "v2"} {
			t.Run(st.name+"/"+version, func(t *testing.T) {
				s, _ := st.new(t, client, rs[version].Objects, keys.Prefix())
				got, err := s.Get(ctx, key, storage.GetOptions{})
				if err != nil {
					t.Fatalf("get: %v", err)
				}
				u := got.(*unstructured.Unstructured)
				if want := "example.com/" + version; u.GetAPIVersion() != want {
					t.Errorf("apiVersion = %q, want %q", u.GetAPIVersion(), want)
				}
				wantSpec := map[string]any{
					"replicas":    int64(2),
					"maxReplicas": int64(10),
					"mode":        "fast",
					"port":        int64(8080),
					"template":    map[string]any{"depth": int64(3)},
				}
				spec, _, _ := unstructured.NestedMap(u.Object, "spec")
				if fmt.Sprint(spec) != fmt.Sprint(wantSpec) {
					t.Errorf("spec = %v, want %v", spec, wantSpec)
				}
				list, err := s.List(ctx, keys.Prefix(), storage.ListOptions{})
				if err != nil {
					t.Fatalf("list: %v", err)
				}
				if len(list.Items) != 1 {
					t.Fatalf("list has %d items, want 1", len(list.Items))
				}
				if d, _, _ := unstructured.NestedInt64(list.Items[0].(*unstructured.Unstructured).Object, "spec", "template", "depth"); d != 3 {
					t.Errorf("listed spec.template.depth = %d, want the default 3", d)
				}
			})
		}
	}

	resp, err := client.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(resp.Kvs[0].Value) != string(data) {
		t.Errorf("reads changed the stored object:\n%s\nwant\n%s", resp.Kvs[0].Value, data)
	}
}

// TestWriteThroughServedVersion stores an object written in v2 in the
// storage version v1.
func TestWriteThroughServedVersion(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	srv := etcdtest.Start(t)
	client := srv.Client(t)
	ctx := context.Background()
	keys := storage.NewKeys("/write", "example.com", "widgets")
	o := rs["v2"].Objects
	s := etcd3.New(client, o, o.New)
	in := o.New().(*unstructured.Unstructured)
	in.SetNamespace("ns")
	in.SetName("w")
	out, err := s.Create(ctx, keys.Object("ns", "w"), in)
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if got := out.GetObjectKind().GroupVersionKind().Version; got != "v2" {
		t.Errorf("created object is in %s, want v2", got)
	}
	resp, err := client.Get(ctx, keys.Object("ns", "w"))
	if err != nil {
		t.Fatal(err)
	}
	raw := objects.NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
	obj, err := raw.Decode(resp.Kvs[0].Value)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*unstructured.Unstructured).GetAPIVersion(); got != "example.com/v1" {
		t.Errorf("stored apiVersion = %q, want the storage version example.com/v1", got)
	}
}
