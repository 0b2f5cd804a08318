package cacher_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

func TestConformance(t *testing.T) {
	kinds := []struct {
		name     string
		group    string
		resource string
		objects  resource.Objects
	}{
		{name: "typed", resource: "configmaps", objects: newObjects(t)},
		{name: "unstructured", group: "example.com", resource: "widgets",
			objects: objects.NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srv := etcdtest.Start(t)
			client := srv.Client(t)
			n := 0
			storagetest.RunConformance(t, func(t *testing.T) storagetest.Fixture {
				n++
				keys := storage.NewKeys(fmt.Sprintf("/t%d", n), k.group, k.resource)
				c := cachertest.Run(t, etcd3.New(client, k.objects, k.objects.New), k.objects.New, keys.Prefix(),
					cacher.WithBookmarkInterval(100*time.Millisecond), cacher.WithWaitTimeout(time.Second))
				return storagetest.Fixture{
					Store:   c,
					Client:  client,
					Keys:    keys,
					Objects: k.objects,
					Compact: func(ctx context.Context, rev int64) error {
						if _, err := client.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
							return err
						}
						c.Compact(rev)
						return nil
					},
					Bookmarks: true,
				}
			})
		})
	}
}
