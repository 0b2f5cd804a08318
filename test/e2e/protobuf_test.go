package e2e

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
	"k8s.io/client-go/tools/cache"

	"kplane.dev/test/e2e/harness"
)

// contentTypes records the Content-Type of every answer a client gets.
type contentTypes struct {
	mu    sync.Mutex
	types map[string]int
}

func (c *contentTypes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil {
			c.mu.Lock()
			c.types[resp.Header.Get("Content-Type")]++
			c.mu.Unlock()
		}
		return resp, err
	})
}

// TestProtobufThroughGateway runs client-go as controllers run it, asking
// for protobuf only, through the gateway: writes, reads, lists, a watch,
// an informer and an error all come back as protobuf.
func TestProtobufThroughGateway(t *testing.T) {
	sys := harness.Start(t)
	cfg := unthrottled(sys.RESTConfig(t))
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf
	seen := &contentTypes{types: map[string]int{}}
	cfg.WrapTransport = seen.wrap
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pb"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("pb")

	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("pb"))
	inf := factory.Core().V1().ConfigMaps().Informer()
	added := make(chan string, 16)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added <- obj.(*corev1.ConfigMap).Name }}); err != nil {
		t.Fatal(err)
	}
	factory.Start(stop)
	defer factory.Shutdown()
	defer close(stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil || created.Data["k"] != "v" {
		t.Fatalf("create: %+v, %v", created, err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: created.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created.Data["k"] = "changed"
	if _, err := cms.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if cm, ok := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Modified || !ok || cm.Data["k"] != "changed" {
			t.Errorf("watch event %s %#v, want the update", ev.Type, ev.Object)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the watch saw no update")
	}
	for informed := false; !informed; {
		select {
		case name := <-added:
			informed = name == "cm"
		case <-time.After(30 * time.Second):
			t.Fatal("the informer saw no create")
		}
	}
	if list, err := cms.List(ctx, metav1.ListOptions{}); err != nil || len(list.Items) != 1 {
		t.Errorf("list: %+v, %v", list, err)
	}
	if _, err := cs.EventsV1().Events("pb").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list events.k8s.io events: %v", err)
	}
	if _, err := cms.Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) || err.Error() != `configmaps "missing" not found` {
		t.Errorf("get of a missing configmap: %v, want kube's NotFound", err)
	}

	seen.mu.Lock()
	defer seen.mu.Unlock()
	for ct := range seen.types {
		if ct != runtime.ContentTypeProtobuf && ct != runtime.ContentTypeProtobuf+";stream=watch" {
			t.Errorf("answers by Content-Type %v, want protobuf only", seen.types)
		}
	}
}
