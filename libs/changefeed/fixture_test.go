package changefeed_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/etcd3"
	proto "kplane.dev/proto/changefeed"
)

const (
	wait   = 30 * time.Second
	prefix = "/kplane"
)

// fixture is an etcd with a ConfigMap store and a NATS server.
type fixture struct {
	etcd  *clientv3.Client
	js    jetstream.JetStream
	store *etcd3.Store
	keys  storage.Keys
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatal(err)
	}
	client := etcdtest.Start(t).Client(t)
	return &fixture{
		etcd:  client,
		js:    natstest.Start(t).JetStream(t),
		store: etcd3.New(client, objs, objs.New),
		keys:  storage.NewKeys(prefix, "", "configmaps"),
	}
}

func configMap(name, value string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Data:       map[string]string{"k": value},
	}
}

func (f *fixture) create(t testing.TB, name string) string {
	t.Helper()
	obj, err := f.store.Create(context.Background(), f.keys.Object("ns", name), configMap(name, "v0"))
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return obj.(*corev1.ConfigMap).ResourceVersion
}

func (f *fixture) update(t testing.TB, name, value string) string {
	t.Helper()
	obj, err := f.store.GuaranteedUpdate(context.Background(), f.keys.Object("ns", name), nil, func(existing runtime.Object) (runtime.Object, error) {
		cm := existing.(*corev1.ConfigMap)
		cm.Data["k"] = value
		return cm, nil
	})
	if err != nil {
		t.Fatalf("update %s: %v", name, err)
	}
	return obj.(*corev1.ConfigMap).ResourceVersion
}

func (f *fixture) delete(t testing.TB, name string) {
	t.Helper()
	if _, err := f.store.Delete(context.Background(), f.keys.Object("ns", name), nil, nil); err != nil {
		t.Fatalf("delete %s: %v", name, err)
	}
}

func (f *fixture) revision(t testing.TB) int64 {
	t.Helper()
	rev, err := f.store.CurrentRevision(context.Background())
	if err != nil {
		t.Fatalf("read current revision: %v", err)
	}
	return rev
}

// runPublisher runs a publisher until the returned stop is called or the
// test ends.
func (f *fixture) runPublisher(t testing.TB, opts ...changefeed.Option) (stop func()) {
	t.Helper()
	p := changefeed.NewPublisher(f.etcd, f.js, prefix, append([]changefeed.Option{changefeed.WithRetryInterval(10 * time.Millisecond)}, opts...)...)
	stop = runUntilStopped(t, p.Run)
	f.waitForStream(t)
	return stop
}

// waitForStream waits until a publisher created the stream, which a
// consumer needs.
func (f *fixture) waitForStream(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		_, err := f.js.Stream(context.Background(), proto.StreamName)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream %s not created: %v", proto.StreamName, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runUntilStopped(t testing.TB, run func(context.Context) error) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// collector gathers what a Subscribe hands it.
type collector struct {
	mu     sync.Mutex
	events []proto.Event
}

func (f *fixture) subscribe(t testing.TB, filter string, from int64) *collector {
	t.Helper()
	c := &collector{}
	runUntilStopped(t, func(ctx context.Context) error {
		return changefeed.Subscribe(ctx, f.js, filter, from, func(_ context.Context, e proto.Event) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.events = append(c.events, e)
			return nil
		})
	})
	return c
}

// waitUntil polls until done says the events are complete.
func (c *collector) waitUntil(t testing.TB, what string, done func([]proto.Event) bool) []proto.Event {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		c.mu.Lock()
		events := append([]proto.Event(nil), c.events...)
		c.mu.Unlock()
		if done(events) {
			return events
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; got %d events: %+v", what, len(events), summary(events))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForName waits for an event about object name.
func (c *collector) waitForName(t testing.TB, name string) []proto.Event {
	t.Helper()
	return c.waitUntil(t, "an event of "+name, func(events []proto.Event) bool {
		for _, e := range events {
			if e.Name == name {
				return true
			}
		}
		return false
	})
}

// brief is what a test compares of an event.
type brief struct {
	Type            proto.EventType
	Name            string
	ResourceVersion string
}

func summary(events []proto.Event) []brief {
	out := make([]brief, len(events))
	for i, e := range events {
		out[i] = brief{Type: e.Type, Name: e.Name, ResourceVersion: e.ResourceVersion}
	}
	return out
}
