package integration_test

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/storage/cacher"
)

// wait bounds waits for what should happen promptly; reached only when a
// test fails.
const wait = 20 * time.Second

// history is the watch cache's event ring in these tests: small, so a test
// can push a disconnected informer's position out of it.
const history = 16

func startServer(t *testing.T) *apitest.Server {
	t.Helper()
	return apitest.Start(t, apitest.Options{
		Proxy: true,
		Cacher: []cacher.Option{
			cacher.WithHistory(history),
			cacher.WithBookmarkInterval(100 * time.Millisecond),
		},
	})
}

func typedClient(t testing.TB, cfg *restclient.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// classicListWatch turns off client-go's watch-list mode (sendInitialEvents)
// for the reflector that uses it, so the informer lists, then watches.
type classicListWatch struct{ *cache.ListWatch }

func (classicListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// relisted reports whether requests hold a list of configmaps or a watch
// that sends its initial events: a relist in either of client-go's modes.
func relisted(requests []*url.URL) bool {
	for _, u := range requests {
		if !strings.HasSuffix(u.Path, "/configmaps") {
			continue
		}
		q := u.Query()
		if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" {
			return true
		}
	}
	return false
}

// TestInformerFollowsEveryChange runs an informer through what controllers
// meet: the initial sync, bookmarks on a quiet namespace, a dropped
// connection during which its position leaves the watch cache (410 Expired,
// then a relist), and checks that its cache ends equal to a fresh list.
func TestInformerFollowsEveryChange(t *testing.T) {
	for _, mode := range []string{"watch-list", "list-then-watch"} {
		t.Run(mode, func(t *testing.T) {
			srv := startServer(t)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			writer := typedClient(t, srv.DirectConfig).CoreV1()
			const ns = "team-a"
			for i := range 5 {
				mustCreateConfigMap(ctx, t, writer, ns, fmt.Sprintf("before-%d", i))
			}

			client := typedClient(t, srv.Config)
			lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "configmaps", ns, fields.Everything())
			var source cache.ListerWatcher = lw
			if mode == "list-then-watch" {
				source = classicListWatch{lw}
			}
			informer := cache.NewSharedIndexInformer(source, &corev1.ConfigMap{}, 0, cache.Indexers{})
			go informer.Run(ctx.Done())
			if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
				t.Fatal("informer never synced")
			}
			// A classic informer lists at resourceVersion 0, which the
			// watch cache may answer from a moment ago; its watch brings
			// the rest.
			eventually(t, "the informer to hold the 5 configmaps", func() bool {
				return sameObjects(ctx, t, writer, ns, informer.GetStore())
			})

			// A write in another namespace reaches the informer only as
			// the revision its bookmarks carry.
			other := mustCreateConfigMap(ctx, t, writer, "team-b", "elsewhere")
			eventually(t, "a bookmark carrying the other namespace's revision", func() bool {
				return atLeast(informer.LastSyncResourceVersion(), other.ResourceVersion)
			})

			srv.Proxy.Cut()
			// More changes than the watch cache keeps, while the
			// informer cannot see them: its position expires.
			for i := range history {
				mustCreateConfigMap(ctx, t, writer, ns, fmt.Sprintf("during-%d", i))
			}
			if err := writer.ConfigMaps(ns).Delete(ctx, "before-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			cm, err := writer.ConfigMaps(ns).Get(ctx, "before-1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cm.Data = map[string]string{"changed": "while away"}
			if _, err := writer.ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			before := len(srv.Requests())
			srv.Proxy.Restore()

			// The informer watches again from its old position, which
			// the cache no longer holds (410 Expired), and lists again.
			eventually(t, "the informer to list again", func() bool {
				return relisted(srv.Requests()[before:])
			})
			eventually(t, "the informer to match a fresh list", func() bool {
				return sameObjects(ctx, t, writer, ns, informer.GetStore())
			})
		})
	}
}

// TestDynamicInformerFollowsUnstructuredChanges is the same for a custom
// resource read through the dynamic client, including status writes.
func TestDynamicInformerFollowsUnstructuredChanges(t *testing.T) {
	srv := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(apitest.Widgets).Namespace("ns")
	informer := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return widgets.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return widgets.Watch(ctx, o)
		},
	}, &unstructured.Unstructured{}, 0, cache.Indexers{})
	go informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer never synced")
	}
	for i := range 3 {
		w := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i)},
			"spec":     map[string]any{"size": int64(i)},
		}}
		created, err := widgets.Create(ctx, w, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(created.Object, "Ready", "status", "phase"); err != nil {
			t.Fatal(err)
		}
		if _, err := widgets.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the informer to hold every widget with its status", func() bool {
		list, err := widgets.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 3 || len(informer.GetStore().List()) != 3 {
			return false
		}
		for _, item := range list.Items {
			got, ok, _ := informer.GetStore().GetByKey("ns/" + item.GetName())
			if !ok || got.(*unstructured.Unstructured).GetResourceVersion() != item.GetResourceVersion() {
				return false
			}
			if phase, _, _ := unstructured.NestedString(got.(*unstructured.Unstructured).Object, "status", "phase"); phase != "Ready" {
				return false
			}
		}
		return true
	})
}

func mustCreateConfigMap(ctx context.Context, t *testing.T, c corev1client.CoreV1Interface, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm, err := c.ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]string{"k": name},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create configmap %s/%s: %v", ns, name, err)
	}
	return cm
}

// eventually polls cond until it holds or the wait runs out.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// atLeast compares resourceVersions as the revisions they are.
func atLeast(rv, min string) bool {
	a, errA := strconv.ParseInt(rv, 10, 64)
	b, errB := strconv.ParseInt(min, 10, 64)
	return errA == nil && errB == nil && a >= b
}

// sameObjects reports whether store holds exactly the configmaps of ns, at
// the resourceVersions a fresh list returns.
func sameObjects(ctx context.Context, t *testing.T, c corev1client.CoreV1Interface, ns string, store cache.Store) bool {
	t.Helper()
	list, err := c.ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list configmaps: %v", err)
	}
	if len(store.List()) != len(list.Items) {
		return false
	}
	for _, item := range list.Items {
		got, ok, err := store.GetByKey(ns + "/" + item.Name)
		if err != nil || !ok || got.(*corev1.ConfigMap).ResourceVersion != item.ResourceVersion {
			return false
		}
	}
	return true
}
