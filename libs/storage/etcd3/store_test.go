package etcd3_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
	"kplane.dev/libs/storage/storagetest"
)

func configMaps(t testing.TB) resource.Objects {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	o, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func widgets() resource.Objects {
	return objects.NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
}

func TestConformance(t *testing.T) {
	kinds := []struct {
		name     string
		group    string
		resource string
		objects  resource.Objects
	}{
		{name: "typed", resource: "configmaps", objects: configMaps(t)},
		{name: "unstructured", group: "example.com", resource: "widgets", objects: widgets()},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			// One etcd serves every test of the kind; each test gets its
			// own key prefix.
			srv := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
			client := srv.Client(t)
			n := 0
			storagetest.RunConformance(t, func(t *testing.T) storagetest.Fixture {
				n++
				return storagetest.Fixture{
					Store:     etcd3.New(client, k.objects, k.objects.New),
					Client:    client,
					Keys:      storage.NewKeys(fmt.Sprintf("/t%d", n), k.group, k.resource),
					Objects:   k.objects,
					Bookmarks: true,
				}
			})
		})
	}
}
