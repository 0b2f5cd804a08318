package server_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

// TestProtobufClients drives the server with client-go set to protobuf,
// as controllers run it: every answer (objects, lists, watch streams,
// errors, metadata) must decode from protobuf, since client-go sends
// protobuf and reads what the Content-Type says.
func TestProtobufClients(t *testing.T) {
	f := newFixture(t, direct)
	cfg := *f.config
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	// client-go decodes by the answer's Content-Type, so a JSON answer
	// would pass unseen: every answer's type is recorded.
	var mu sync.Mutex
	types := map[string]int{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil {
				mu.Lock()
				types[resp.Header.Get("Content-Type")]++
				mu.Unlock()
			}
			return resp, err
		})
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for ct := range types {
			if ct != runtime.ContentTypeProtobuf && ct != runtime.ContentTypeProtobuf+";stream=watch" {
				t.Errorf("answers of type %v, want protobuf only", types)
			}
		}
	}()
	cs, err := kubernetes.NewForConfig(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("ns1")
	ctx := f.ctx

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil || created.Data["k"] != "v" || created.ResourceVersion == "" {
		t.Fatalf("create: %+v, %v", created, err)
	}
	if got, err := cms.Get(ctx, "pb", metav1.GetOptions{}); err != nil || got.UID != created.UID {
		t.Fatalf("get: %+v, %v", got, err)
	}
	list, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 || list.ResourceVersion == "" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `configmaps "missing" not found` {
		t.Fatalf("get of a missing configmap: %v, want kube's NotFound", err)
	}

	t.Run("watch", func(t *testing.T) {
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if _, err := cms.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "pb", ResourceVersion: created.ResourceVersion}, Data: map[string]string{"k": "changed"}}, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case ev := <-w.ResultChan():
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if ev.Type != watch.Modified || !ok || cm.Data["k"] != "changed" {
				t.Fatalf("event %s %#v, want the update", ev.Type, ev.Object)
			}
		case <-time.After(wait):
			t.Fatal("no event")
		}
	})

	t.Run("informer", func(t *testing.T) {
		factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("ns1"))
		inf := factory.Core().V1().ConfigMaps().Informer()
		added := make(chan string, 16)
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
			added <- obj.(*corev1.ConfigMap).Name
		}}); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		factory.Start(stop)
		defer factory.Shutdown()
		defer close(stop)
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			t.Fatal("informer did not sync")
		}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "later"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case name := <-added:
				if name == "later" {
					return
				}
			case <-time.After(wait):
				t.Fatal("the informer saw no create")
			}
		}
	})

	t.Run("metadata", func(t *testing.T) {
		mc, err := metadata.NewForConfig(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		items, err := mc.Resource(configMapsGVR).Namespace("ns1").List(ctx, metav1.ListOptions{})
		if err != nil || len(items.Items) == 0 || items.Items[0].UID == "" {
			t.Fatalf("metadata list: %+v, %v", items, err)
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
