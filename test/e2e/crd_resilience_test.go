package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/deploy/launcher"
	"kplane.dev/test/e2e/harness"
)

// things are the custom resources of the resilience tests: a namespaced
// CRD whose spec.value is what a write sets.
var thingsGVR = schema.GroupVersionResource{Group: "resilience.e2e.example.com", Version: "v1", Resource: "things"}

const thingsCRDName = "things.resilience.e2e.example.com"

func dynamicClient(t testing.TB, cfg *rest.Config) *dynamic.DynamicClient {
	t.Helper()
	c, err := dynamic.NewForConfig(unthrottled(cfg))
	if err != nil {
		t.Fatalf("client-go dynamic client: %v", err)
	}
	return c
}

// createThingsCRD creates the things CRD through the gateway and waits
// until the gateway and each of the replicas crd replicas serve things: a
// replica that has not seen the CRD yet answers 404, which is not what
// the load is about.
func createThingsCRD(t *testing.T, sys *harness.System, replicas int) {
	t.Helper()
	ctx := context.Background()
	crds := dynamicClient(t, sys.RESTConfig(t)).Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": thingsCRDName},
		"spec": map[string]any{
			"group": thingsGVR.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type":       "object",
						"properties": map[string]any{"value": map[string]any{"type": "string"}},
					}},
				}},
			}},
		},
	}}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD: %v", err)
	}
	clients := []dynamic.Interface{dynamicClient(t, sys.RESTConfig(t))}
	for r := range replicas {
		cfg := sys.CoreConfig(t)
		cfg.Host = "https://127.0.0.1:" + strconv.Itoa(sys.Ports[launcher.ReplicaName("crd", r, replicas)])
		clients = append(clients, dynamicClient(t, cfg))
	}
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		for i, c := range clients {
			if _, err := c.Resource(thingsGVR).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
				return fmt.Errorf("list things through client %d (0 is the gateway, then each replica): %w", i, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// replicaDied says whether err is a write's answer from the gateway when
// the crd replica handling it was unreachable or died: a client sends the
// write again.
func replicaDied(err error) bool { return backendUnreachable(err) || answerCut(err) }

// change is one acknowledged write as a watch shows it; rv is empty for a
// delete, whose resourceVersion the client is not told.
type change struct {
	typ      watch.EventType
	name, rv string
}

// thingWriter writes things of one namespace as writer writes configmaps,
// and also remembers the value each acknowledged write left and the
// order of the writes.
type thingWriter struct {
	*writer
	res dynamic.ResourceInterface
	// values maps a name to the spec.value of its last acknowledged
	// write; a deleted name is absent.
	values map[string]string
	// changes are the acknowledged writes in order.
	changes []change
}

func newThingWriter(dyn dynamic.Interface, namespace string, retriable func(error) bool, resent *atomic.Int64) *thingWriter {
	return &thingWriter{
		writer: newWriter(nil, namespace, retriable, resent),
		res:    dyn.Resource(thingsGVR).Namespace(namespace),
		values: map[string]string{},
	}
}

func resilientThing(namespace, name, value, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": thingsGVR.GroupVersion().String(),
		"kind":       "Thing",
		"metadata":   map[string]any{"name": name, "namespace": namespace, "resourceVersion": rv},
		"spec":       map[string]any{"value": value},
	}}
}

func thingValue(o *unstructured.Unstructured) string {
	v, _, _ := unstructured.NestedString(o.Object, "spec", "value")
	return v
}

// create creates name with value; AlreadyExists on a resend is the first
// attempt having taken effect.
func (w *thingWriter) create(ctx context.Context, name, value string) error {
	obj := resilientThing(w.namespace, name, value, "")
	return w.record(watch.Added, name, value, w.attempt(ctx, "create "+name,
		func(ctx context.Context) error {
			got, err := w.res.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
			if err == nil {
				w.acked[name] = got.GetResourceVersion()
			}
			return err
		},
		func(ctx context.Context, err error) (bool, error) {
			if !apierrors.IsAlreadyExists(err) {
				return false, nil
			}
			return w.confirm(ctx, name, value)
		}))
}

// update sets name's value on top of its last acknowledged write;
// Conflict on a resend is the first attempt having taken effect.
func (w *thingWriter) update(ctx context.Context, name, value string) error {
	obj := resilientThing(w.namespace, name, value, w.acked[name])
	return w.record(watch.Modified, name, value, w.attempt(ctx, "update "+name,
		func(ctx context.Context) error {
			got, err := w.res.Update(ctx, obj.DeepCopy(), metav1.UpdateOptions{})
			if err == nil {
				w.acked[name] = got.GetResourceVersion()
			}
			return err
		},
		func(ctx context.Context, err error) (bool, error) {
			if !apierrors.IsConflict(err) {
				return false, nil
			}
			return w.confirm(ctx, name, value)
		}))
}

// delete deletes name; NotFound on a resend is the first attempt having
// taken effect.
func (w *thingWriter) delete(ctx context.Context, name string) error {
	return w.record(watch.Deleted, name, "", w.attempt(ctx, "delete "+name,
		func(ctx context.Context) error {
			return w.res.Delete(ctx, name, metav1.DeleteOptions{})
		},
		func(_ context.Context, err error) (bool, error) {
			return apierrors.IsNotFound(err), nil
		}))
}

// record remembers an acknowledged write, and passes err on.
func (w *thingWriter) record(typ watch.EventType, name, value string, err error) error {
	if err != nil {
		return err
	}
	w.writes++
	if typ == watch.Deleted {
		delete(w.acked, name)
		delete(w.values, name)
		w.changes = append(w.changes, change{typ: typ, name: name})
		return nil
	}
	w.values[name] = value
	w.changes = append(w.changes, change{typ: typ, name: name, rv: w.acked[name]})
	return nil
}

// confirm reads name back after an ambiguous write and records it when it
// holds value, the write's; anything else is a write nobody made.
func (w *thingWriter) confirm(ctx context.Context, name, value string) (bool, error) {
	var got *unstructured.Unstructured
	err := w.attempt(ctx, "read back "+name,
		func(ctx context.Context) error {
			var err error
			got, err = w.res.Get(ctx, name, metav1.GetOptions{})
			return err
		},
		func(context.Context, error) (bool, error) { return false, nil })
	if err != nil {
		return false, err
	}
	if v := thingValue(got); v != value {
		return false, fmt.Errorf("%s holds spec.value %q, want the resent write's %q", name, v, value)
	}
	w.acked[name] = got.GetResourceVersion()
	return true, nil
}

// thingState is a thing as the tests compare it.
type thingState struct{ rv, value string }

// things maps names to their state.
type things map[string]thingState

func thingsOf(objs []any) things {
	s := things{}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		s[u.GetName()] = thingState{rv: u.GetResourceVersion(), value: thingValue(u)}
	}
	return s
}

func listThings(ctx context.Context, res dynamic.ResourceInterface) (things, error) {
	list, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list things: %w", err)
	}
	s := things{}
	for _, u := range list.Items {
		s[u.GetName()] = thingState{rv: u.GetResourceVersion(), value: thingValue(&u)}
	}
	return s, nil
}

// acknowledged is the state the acknowledged writes of ws left.
func acknowledged(ws ...*thingWriter) things {
	s := things{}
	for _, w := range ws {
		for name, rv := range w.acked {
			s[name] = thingState{rv: rv, value: w.values[name]}
		}
	}
	return s
}

// diff describes how got differs from want, or is empty.
func (want things) diff(got things) string {
	var b strings.Builder
	for name, w := range want {
		switch g, ok := got[name]; {
		case !ok:
			fmt.Fprintf(&b, "%s %+v missing; ", name, w)
		case g != w:
			fmt.Fprintf(&b, "%s is %+v, want %+v; ", name, g, w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok {
			fmt.Fprintf(&b, "%s %+v unexpected; ", name, g)
		}
	}
	return b.String()
}

// writesBetween is how many writes are acknowledged before a process is
// stopped, and after it is back before the next one is: each restart
// happens under load.
const writesBetween = 50

// load runs one writer's writes in the background until told to finish.
type load struct {
	acked atomic.Int64
	stop  chan struct{}
	done  chan error
}

// startLoad calls write(0), write(1), ... in a goroutine, stopping at the
// first error, until finish is called, and then to the end of the next
// cycle of tail writes: writes follow the last restart, and end on a whole
// cycle of the caller's.
func startLoad(tail int, write func(i int) error) *load {
	l := &load{stop: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		l.done <- func() error {
			last := -1
			for i := 0; last < 0 || i < last; i++ {
				if last < 0 {
					select {
					case <-l.stop:
						last = i - i%tail + 2*tail
					default:
					}
				}
				if err := write(i); err != nil {
					return err
				}
				l.acked.Add(1)
			}
			return nil
		}()
	}()
	return l
}

// await waits until n writes are acknowledged; a writer that failed
// before is reported as itself.
func (l *load) await(n int64) error {
	deadline := time.NewTimer(convergeTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for l.acked.Load() < n {
		select {
		case err := <-l.done:
			return fmt.Errorf("the writer stopped after %d acknowledged writes, before %d: %v", l.acked.Load(), n, err)
		case <-deadline.C:
			return fmt.Errorf("%d writes acknowledged after %v, waiting for %d", l.acked.Load(), convergeTimeout, n)
		case <-tick.C:
		}
	}
	return nil
}

// finish stops the writer after its tail and returns its error.
func (l *load) finish() error {
	close(l.stop)
	return <-l.done
}

// thingsView is the state an informer's event handler builds from its
// notifications alone.
type thingsView struct {
	mu     sync.Mutex
	things things
}

func (v *thingsView) OnAdd(obj any, _ bool) { v.set(obj) }
func (v *thingsView) OnUpdate(_, obj any)   { v.set(obj) }

func (v *thingsView) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.things, obj.(*unstructured.Unstructured).GetName())
}

func (v *thingsView) set(obj any) {
	u := obj.(*unstructured.Unstructured)
	v.mu.Lock()
	defer v.mu.Unlock()
	v.things[u.GetName()] = thingState{rv: u.GetResourceVersion(), value: thingValue(u)}
}

func (v *thingsView) snapshot() things {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(things, len(v.things))
	for k, s := range v.things {
		out[k] = s
	}
	return out
}

// classicDynamic is a dynamic client whose informers list, then watch:
// client-go turns its watch-list mode (sendInitialEvents) off for a client
// that says it does not support it.
type classicDynamic struct{ dynamic.Interface }

func (classicDynamic) IsWatchListSemanticsUnSupported() bool { return true }

// requestLog records the URLs of the requests a client sends.
type requestLog struct {
	mu   sync.Mutex
	urls []*url.URL
}

func (l *requestLog) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		l.mu.Lock()
		l.urls = append(l.urls, r.URL)
		l.mu.Unlock()
		return rt.RoundTrip(r)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// watchLists and lists count the watches that send initial events and the
// lists among the requests.
func (l *requestLog) counts() (watchLists, lists int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, u := range l.urls {
		q := u.Query()
		switch {
		case q.Get("watch") != "true":
			lists++
		case q.Get("sendInitialEvents") == "true":
			watchLists++
		}
	}
	return watchLists, lists
}

// TestCRDInformerSurvivesRestarts runs dynamic informers on a custom
// resource through the gateway, one in client-go's default watch-list
// mode and one that lists then watches, while a writer creates, updates
// and deletes custom resources and the crd process is terminated, then
// killed, under them. At the end each informer's cache equals a fresh
// list (names, resourceVersions and spec), which equals the writer's
// acknowledged writes, and so does the state its event handler built from
// notifications alone: no event was missed.
func TestCRDInformerSurvivesRestarts(t *testing.T) {
	const (
		namespace = "default"
		names     = 8
	)
	sys := harness.Start(t)
	ctx := context.Background()
	createThingsCRD(t, sys, 1)

	type informed struct {
		mode     string
		log      *requestLog
		informer cache.SharedIndexInformer
		seen     *thingsView
	}
	var all []informed
	var factories []dynamicinformer.DynamicSharedInformerFactory
	stop := make(chan struct{})
	// Shutdown waits for the informers, which run until stop closes.
	defer func() {
		close(stop)
		for _, f := range factories {
			f.Shutdown()
		}
	}()
	for _, mode := range []string{"watch-list", "list-then-watch"} {
		log := &requestLog{}
		cfg := sys.RESTConfig(t)
		cfg.WrapTransport = log.wrap
		var client dynamic.Interface = dynamicClient(t, cfg)
		if mode == "list-then-watch" {
			client = classicDynamic{client}
		}
		factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 0, namespace, nil)
		informer := factory.ForResource(thingsGVR).Informer()
		seen := &thingsView{things: things{}}
		if _, err := informer.AddEventHandler(seen); err != nil {
			t.Fatalf("add event handler: %v", err)
		}
		factory.Start(stop)
		factories = append(factories, factory)
		all = append(all, informed{mode: mode, log: log, informer: informer, seen: seen})
	}
	syncCtx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	for _, i := range all {
		if !cache.WaitForCacheSync(syncCtx.Done(), i.informer.HasSynced) {
			t.Fatalf("%s informer not synced", i.mode)
		}
	}

	var resent atomic.Int64
	w := newThingWriter(dynamicClient(t, sys.RESTConfig(t)), namespace, replicaDied, &resent)
	load := startLoad(names*4, func(i int) error {
		name := fmt.Sprintf("informed-%d", i%names)
		switch round := i / names; round % 4 {
		case 0:
			return w.create(ctx, name, fmt.Sprint(round))
		case 1, 2:
			return w.update(ctx, name, fmt.Sprint(round))
		default:
			return w.delete(ctx, name)
		}
	})
	restarts := []struct {
		how     string
		restart func(testing.TB, string) int
	}{
		{how: "terminating", restart: sys.RestartService},
		{how: "killing", restart: sys.KillService},
	}
	for _, r := range restarts {
		if err := load.await(load.acked.Load() + writesBetween); err != nil {
			t.Fatalf("before %s crd: %v", r.how, err)
		}
		t.Logf("%s crd after %d acknowledged writes", r.how, load.acked.Load())
		r.restart(t, "crd")
	}
	if err := load.finish(); err != nil {
		t.Fatalf("writer: %v", err)
	}
	t.Logf("%d writes acknowledged, %d sent again after crd was unreachable or died mid-answer", w.writes, resent.Load())

	lister := dynamicClient(t, sys.RESTConfig(t)).Resource(thingsGVR).Namespace(namespace)
	start := time.Now()
	if err := eventually(ctx, convergeTimeout, func(ctx context.Context) error {
		fresh, err := listThings(ctx, lister)
		if err != nil {
			return err
		}
		if d := acknowledged(w).diff(fresh); d != "" {
			return fmt.Errorf("a fresh list differs from the acknowledged writes: %s", d)
		}
		for _, i := range all {
			if d := fresh.diff(thingsOf(i.informer.GetStore().List())); d != "" {
				return fmt.Errorf("%s informer's cache differs from a fresh list: %s", i.mode, d)
			}
			if d := fresh.diff(i.seen.snapshot()); d != "" {
				return fmt.Errorf("%s informer's event handler's view differs from a fresh list: %s", i.mode, d)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	t.Logf("informers caught up %v after the last write", time.Since(start).Round(time.Millisecond))
	for _, i := range all {
		watchLists, lists := i.log.counts()
		t.Logf("%s informer: %d watch-list requests, %d lists", i.mode, watchLists, lists)
		switch {
		case i.mode == "watch-list" && watchLists == 0:
			t.Errorf("the watch-list informer never asked for initial events: it was not in watch-list mode")
		case i.mode == "list-then-watch" && (watchLists != 0 || lists == 0):
			t.Errorf("the list-then-watch informer sent %d watch-list requests and %d lists, want 0 and some", watchLists, lists)
		}
	}
}

// TestCRDReplicaKilledUnderLoad runs two crd replicas behind the gateway
// and SIGKILLs one while four clients read and write custom resources
// through the gateway, holding crd to core's standard
// (TestCoreReplicaKilledUnderLoad): no read fails, since the gateway sends
// a GET that found a replica unreachable to the other one; a write fails
// only with the gateway's 503 for an unreachable replica, or its answer
// cut off when the replica died mid-answer, and the client sends it again;
// and every acknowledged write is in the final list with its content.
func TestCRDReplicaKilledUnderLoad(t *testing.T) {
	const (
		namespace  = "default"
		workers    = 4
		iterations = 40 // each: create, get, update, list, and every other one a delete
		victim     = "crd-1"
	)
	sys := harness.Start(t, harness.WithReplicas("crd", 2))
	ctx := context.Background()
	createThingsCRD(t, sys, 2)

	var resent, reads atomic.Int64
	writers := make([]*thingWriter, workers)
	for i := range writers {
		writers[i] = newThingWriter(dynamicClient(t, sys.RESTConfig(t)), namespace, replicaDied, &resent)
	}
	killUnderLoad(ctx, t, sys, victim, workers, iterations, func(ctx context.Context, i, k int) error {
		return thingIteration(ctx, writers[i], fmt.Sprintf("load-%d-", i), k, &reads)
	})
	fresh, err := listThings(ctx, dynamicClient(t, sys.RESTConfig(t)).Resource(thingsGVR).Namespace(namespace))
	if err != nil {
		t.Fatal(err)
	}
	want := acknowledged(writers...)
	if d := want.diff(fresh); d != "" {
		t.Errorf("final list differs from the acknowledged writes: %s", d)
	}
	writes := 0
	for _, w := range writers {
		writes += w.writes
	}
	t.Logf("%d writes acknowledged (%d sent again after the killed replica was unreachable or died mid-answer), %d reads, %d things left as acknowledged",
		writes, resent.Load(), reads.Load(), len(want))
}

// thingIteration is iteration k of a worker whose names start with
// prefix: it creates a thing, reads it back, updates it, lists the
// namespace, and every other iteration deletes the previous one.
func thingIteration(ctx context.Context, w *thingWriter, prefix string, k int, reads *atomic.Int64) error {
	name := fmt.Sprintf("%s%d", prefix, k)
	if err := w.create(ctx, name, "created"); err != nil {
		return err
	}
	reads.Add(1)
	got, err := w.res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return readError{fmt.Errorf("get %s: %w", name, err)}
	}
	if got.GetResourceVersion() != w.acked[name] || thingValue(got) != "created" {
		return readError{fmt.Errorf("get %s: rv %s value %q, want the acknowledged create's %s %q", name, got.GetResourceVersion(), thingValue(got), w.acked[name], "created")}
	}
	if err := w.update(ctx, name, "updated"); err != nil {
		return err
	}
	reads.Add(1)
	if _, err := w.res.List(ctx, metav1.ListOptions{}); err != nil {
		return readError{fmt.Errorf("list: %w", err)}
	}
	if k%2 == 1 {
		return w.delete(ctx, fmt.Sprintf("%s%d", prefix, k-1))
	}
	return nil
}

// followed is what one watcher of things saw.
type followed struct {
	mu      sync.Mutex
	changes []change
	// opened counts the watches the server accepted; ends counts those
	// that ended, each opened again from the last resourceVersion seen.
	opened, ends int
	// failures are error events and refused watches other than the
	// gateway's 503 for an unreachable replica.
	failures []string
}

func (f *followed) snapshot() (changes []change, ends int, failures []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.changes), f.ends, slices.Clone(f.failures)
}

// follow watches res from rv, opening the watch again from the last
// resourceVersion seen whenever it ends, until ctx ends.
func follow(ctx context.Context, res dynamic.ResourceInterface, rv string, f *followed) {
	for ctx.Err() == nil {
		w, err := res.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if !backendUnreachable(err) && !connectionLost(err) {
				f.mu.Lock()
				f.failures = append(f.failures, fmt.Sprintf("watch from rv %s: %v", rv, err))
				f.mu.Unlock()
				if apierrors.IsGone(err) || apierrors.IsResourceExpired(err) {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(retryBackoff):
			}
			continue
		}
		f.mu.Lock()
		f.opened++
		f.mu.Unlock()
		for e := range w.ResultChan() {
			if e.Type == watch.Error {
				f.mu.Lock()
				f.failures = append(f.failures, fmt.Sprintf("error event after rv %s: %v", rv, apierrors.FromObject(e.Object)))
				f.mu.Unlock()
				continue
			}
			u, ok := e.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			if e.Type == watch.Bookmark {
				continue
			}
			c := change{typ: e.Type, name: u.GetName(), rv: rv}
			if e.Type == watch.Deleted {
				c.rv = ""
			}
			f.mu.Lock()
			f.changes = append(f.changes, c)
			f.mu.Unlock()
		}
		w.Stop()
		if ctx.Err() != nil {
			return
		}
		f.mu.Lock()
		f.ends++
		f.mu.Unlock()
	}
}

// TestCRDWatchResumesAfterReplicaDies watches custom resources through the
// gateway from a known resourceVersion while a writer changes them and
// each of two crd replicas is SIGKILLed in turn, so that every watch dies
// under its client at least once. A watch whose replica died ends without
// an error event, the client opens it again from the last resourceVersion
// it saw, and in the end every watcher has seen exactly the acknowledged
// writes in order: none lost, none twice, and no 410, since etcd compacted
// nothing.
func TestCRDWatchResumesAfterReplicaDies(t *testing.T) {
	const (
		namespace = "default"
		watchers  = 6
		names     = 5
	)
	sys := harness.Start(t, harness.WithReplicas("crd", 2))
	ctx := context.Background()
	createThingsCRD(t, sys, 2)
	res := dynamicClient(t, sys.RESTConfig(t)).Resource(thingsGVR).Namespace(namespace)
	start, err := res.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	watchCtx, stopWatching := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWatching()
	seen := make([]*followed, watchers)
	for i := range seen {
		seen[i] = &followed{}
		// A client each, so that each watch is a request of its own the
		// gateway spreads over the replicas.
		client := dynamicClient(t, sys.RESTConfig(t)).Resource(thingsGVR).Namespace(namespace)
		wg.Go(func() { follow(watchCtx, client, start.GetResourceVersion(), seen[i]) })
	}
	// Every watch is open before the first kill, so that each dies with
	// one replica or the other.
	if err := eventually(ctx, convergeTimeout, func(context.Context) error {
		for i, f := range seen {
			f.mu.Lock()
			opened := f.opened
			f.mu.Unlock()
			if opened == 0 {
				return fmt.Errorf("watcher %d is not open yet", i)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	var resent atomic.Int64
	w := newThingWriter(dynamicClient(t, sys.RESTConfig(t)), namespace, replicaDied, &resent)
	load := startLoad(names*3, func(i int) error {
		name := fmt.Sprintf("watched-%d", i%names)
		switch round := i / names; round % 3 {
		case 0:
			return w.create(ctx, name, fmt.Sprint(round))
		case 1:
			return w.update(ctx, name, fmt.Sprint(round))
		default:
			return w.delete(ctx, name)
		}
	})
	for _, victim := range []string{"crd-0", "crd-1"} {
		if err := load.await(load.acked.Load() + writesBetween); err != nil {
			t.Fatalf("before killing %s: %v", victim, err)
		}
		t.Logf("killing %s after %d acknowledged writes", victim, load.acked.Load())
		sys.KillService(t, victim)
	}
	if err := load.finish(); err != nil {
		t.Fatalf("writer: %v", err)
	}

	if err := eventually(ctx, convergeTimeout, func(context.Context) error {
		for i, f := range seen {
			changes, _, failures := f.snapshot()
			if len(failures) > 0 {
				return nil
			}
			if len(changes) < len(w.changes) {
				return fmt.Errorf("watcher %d saw %d of %d changes", i, len(changes), len(w.changes))
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, f := range seen {
		changes, ends, failures := f.snapshot()
		if len(failures) > 0 {
			t.Errorf("watcher %d: %d failures, first: %s", i, len(failures), strings.Join(failures[:min(len(failures), 5)], "; "))
		}
		if ends == 0 {
			t.Errorf("watcher %d: no watch ended although every replica was killed", i)
		}
		if d := diffChanges(w.changes, changes); d != "" {
			t.Errorf("watcher %d (%d watches ended and resumed): %s", i, ends, d)
		}
	}
	t.Logf("%d writes acknowledged (%d sent again after a replica was unreachable or died mid-answer), followed by %d watchers", len(w.changes), resent.Load(), watchers)
}

// diffChanges describes the first difference between the acknowledged
// changes and those a watch saw, or is empty.
func diffChanges(want, got []change) string {
	for i := range min(len(want), len(got)) {
		w, g := want[i], got[i]
		if w.typ != g.typ || w.name != g.name || w.rv != g.rv {
			return fmt.Sprintf("change %d is %s %s at rv %q, want %s %s at rv %q", i, g.typ, g.name, g.rv, w.typ, w.name, w.rv)
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("saw %d changes, want %d", len(got), len(want))
	}
	return ""
}

// TestCRDWatchResumesOnRestartedReplica resumes a watch on a crd replica
// that started after the watch's resourceVersion: the restarted replica's
// watch cache begins at a newer revision, but etcd compacted nothing, so
// the watch goes on from where it was (no 410, no relist) and sees the
// next change.
func TestCRDWatchResumesOnRestartedReplica(t *testing.T) {
	const namespace = "default"
	sys := harness.Start(t)
	ctx := context.Background()
	createThingsCRD(t, sys, 1)
	cfg := sys.RESTConfig(t)
	var resent atomic.Int64
	w := newThingWriter(dynamicClient(t, cfg), namespace, replicaDied, &resent)
	if err := w.create(ctx, "before", "0"); err != nil {
		t.Fatal(err)
	}

	watchCtx, stopWatching := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopWatching()
	seen := &followed{}
	wg.Go(func() { follow(watchCtx, w.res, w.acked["before"], seen) })
	if err := eventually(ctx, convergeTimeout, func(context.Context) error {
		seen.mu.Lock()
		defer seen.mu.Unlock()
		if seen.opened == 0 {
			return errors.New("the watch is not open yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	pid := sys.PID(t, "crd")
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill crd (pid %d): %v", pid, err)
	}
	// A write elsewhere while crd is down: the restarted replica's cache
	// of things starts after the watch's resourceVersion.
	cms := clientset(t, cfg).CoreV1().ConfigMaps(namespace)
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "while-crd-is-down"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sys.WaitReplaced(t, "crd", pid)
	if err := w.update(ctx, "before", "1"); err != nil {
		t.Fatal(err)
	}
	want := []change{{typ: watch.Modified, name: "before", rv: w.acked["before"]}}
	if err := eventually(ctx, convergeTimeout, func(context.Context) error {
		changes, _, failures := seen.snapshot()
		if len(failures) > 0 || len(changes) >= len(want) {
			return nil
		}
		return fmt.Errorf("the watch saw %d changes, want %d", len(changes), len(want))
	}); err != nil {
		t.Fatal(err)
	}
	changes, ends, failures := seen.snapshot()
	if len(failures) > 0 {
		t.Errorf("%d failures, first: %s", len(failures), strings.Join(failures[:min(len(failures), 5)], "; "))
	}
	if ends == 0 {
		t.Error("the watch did not end when crd was killed")
	}
	if d := diffChanges(want, changes); d != "" {
		t.Error(d)
	}
}
