package storagemetrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/cacher/cachertest"
	"kplane.dev/libs/storage/etcd3"
	"kplane.dev/libs/storage/storagemetrics"
)

// wait bounds waits for what should happen promptly.
const wait = 10 * time.Second

// value is the value of the series of family name with labels, and
// whether it exists: a counter's or gauge's value, a histogram's count.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if matches(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue(), true
				case m.Gauge != nil:
					return m.Gauge.GetValue(), true
				case m.Histogram != nil:
					return float64(m.Histogram.GetSampleCount()), true
				}
			}
		}
	}
	return 0, false
}

func matches(m *dto.Metric, labels map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if want, ok := labels[l.GetName()]; ok {
			if want != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(labels)
}

func configMaps(t *testing.T) (func() runtime.Object, *objects.Typed) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	o, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatal(err)
	}
	return o.New, o
}

// TestStoreAndCache checks that a user's create, get, list and watch of
// configmaps through the watch cache show in kube's storage metrics.
func TestStoreAndCache(t *testing.T) {
	client := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond)).Client(t)
	reg := prometheus.NewRegistry()
	m, err := storagemetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	newObj, objs := configMaps(t)
	res := m.Resource(schema.GroupResource{Resource: "configmaps"})
	keys := storage.NewKeys("/t", "", "configmaps")
	direct := etcd3.New(client, objs, newObj, etcd3.WithMetrics(res))
	c := cachertest.Run(t, direct, newObj, keys.Prefix(), cacher.WithMetrics(res))

	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	w, err := c.Watch(ctx, keys.Prefix(), storage.WatchOptions{ResourceVersion: ""})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "a"}}
	if _, err := c.Create(ctx, keys.Object("default", "a"), cm); err != nil {
		t.Fatalf("create: %v", err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != "ADDED" {
			t.Fatalf("watch event %s, want ADDED", ev.Type)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}
	if _, err := c.Get(ctx, keys.Object("default", "a"), storage.GetOptions{}); err != nil {
		t.Fatalf("get: %v", err)
	}
	// The cache serves consistent gets; writes read etcd as direct does.
	if _, err := direct.Get(ctx, keys.Object("default", "a"), storage.GetOptions{}); err != nil {
		t.Fatalf("get from etcd: %v", err)
	}
	if _, err := c.List(ctx, keys.Prefix(), storage.ListOptions{Limit: 1}); err != nil {
		t.Fatalf("list: %v", err)
	}
	if _, err := c.Get(ctx, keys.Object("default", "missing"), storage.GetOptions{}); !storage.IsNotFound(err) {
		t.Fatalf("get missing: %v, want not found", err)
	}

	cm1 := map[string]string{"group": "", "resource": "configmaps"}
	for _, op := range []string{storagemetrics.OpCreate, storagemetrics.OpGet, storagemetrics.OpList, storagemetrics.OpCurrentRevision} {
		labels := map[string]string{"operation": op, "group": "", "resource": "configmaps"}
		if n, _ := value(t, reg, "etcd_requests_total", labels); n < 1 {
			t.Errorf("etcd_requests_total{operation=%q} = %v, want at least 1", op, n)
		}
		if n, _ := value(t, reg, "etcd_request_duration_seconds", labels); n < 1 {
			t.Errorf("etcd_request_duration_seconds{operation=%q} has %v observations, want at least 1", op, n)
		}
	}
	if n, ok := value(t, reg, "etcd_request_errors_total", map[string]string{"operation": storagemetrics.OpCreate}); !ok || n != 0 {
		t.Errorf("etcd_request_errors_total{operation=create} = %v (reported: %v), want 0", n, ok)
	}
	// A create of an object that exists is no etcd error, a conflict.
	if _, err := c.Create(ctx, keys.Object("default", "a"), cm); !storage.IsExists(err) {
		t.Fatalf("second create: %v, want exists", err)
	}
	if n, _ := value(t, reg, "etcd_request_errors_total", map[string]string{"operation": storagemetrics.OpCreate}); n != 0 {
		t.Errorf("etcd_request_errors_total{operation=create} = %v after a conflict, want 0", n)
	}
	// A request etcd does not answer is.
	done, stop := context.WithCancel(ctx)
	stop()
	if _, err := direct.Get(done, keys.Object("default", "a"), storage.GetOptions{}); err == nil {
		t.Fatal("get with a canceled context succeeded")
	}
	if n, _ := value(t, reg, "etcd_request_errors_total", map[string]string{"operation": storagemetrics.OpGet}); n != 1 {
		t.Errorf("etcd_request_errors_total{operation=get} = %v after a failed get, want 1", n)
	}
	if n, _ := value(t, reg, "apiserver_storage_objects", map[string]string{"resource": "configmaps"}); n != 1 {
		t.Errorf("apiserver_storage_objects{resource=configmaps} = %v, want 1", n)
	}
	for name, least := range map[string]float64{
		"apiserver_watch_cache_initializations_total":   1,
		"apiserver_watch_cache_events_received_total":   1,
		"apiserver_watch_cache_events_dispatched_total": 1,
		"apiserver_storage_events_received_total":       1,
		"apiserver_watch_cache_read_wait_seconds":       1,
		"apiserver_watch_cache_resource_version":        2,
		"apiserver_resource_objects":                    1,
	} {
		if n, _ := value(t, reg, name, cm1); n < least {
			t.Errorf("%s{resource=configmaps} = %v, want at least %v", name, n, least)
		}
	}
}

// TestForget checks that a stopped cache's gauges go away, so that a
// deleted resource's last count does not linger.
func TestForget(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	reg := prometheus.NewRegistry()
	m, err := storagemetrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	newObj, objs := configMaps(t)
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	res := m.Resource(gr)
	keys := storage.NewKeys("/t", "example.com", "widgets")
	c, err := cacher.New(etcd3.New(client, objs, newObj), newObj, keys.Prefix(), cacher.WithMetrics(res))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	deadline := time.Now().Add(wait)
	for {
		if _, ok := value(t, reg, "apiserver_storage_objects", map[string]string{"resource": "widgets.example.com"}); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the cache reported no object count")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if n, ok := value(t, reg, "apiserver_storage_objects", map[string]string{"resource": "widgets.example.com"}); ok {
		t.Errorf("stopped cache still reports apiserver_storage_objects = %v", n)
	}

	// The cache of a resource served anew reports on when the old one
	// stops after it started.
	old, renewed := m.Resource(gr), m.Resource(gr)
	renewed.Objects(3)
	old.Forget()
	if n, ok := value(t, reg, "apiserver_storage_objects", map[string]string{"resource": "widgets.example.com"}); n != 3 {
		t.Errorf("apiserver_storage_objects = %v (reported: %v) after an older cache stopped, want the new cache's 3", n, ok)
	}
}
