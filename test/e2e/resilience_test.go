package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/test/e2e/harness"
)

// convergeTimeout bounds the wait for a client to catch up after the
// last write: a reflector whose list or watch failed while a process was
// down backs off up to 30 s before it tries again.
const convergeTimeout = 2 * time.Minute

// TestInformerSurvivesRestarts runs a client-go informer on configmaps
// through the gateway while a writer creates, updates and deletes them,
// and kills the core process, then the gateway process, under it. At the
// end the informer's cache, and the state its event handler built from
// notifications alone, equal a fresh list and the writer's acknowledged
// writes: no event was missed.
func TestInformerSurvivesRestarts(t *testing.T) {
	const (
		namespace = "default"
		names     = 8
		// Each name cycles through create, two updates and delete.
		writes = 160
	)
	sys := harness.Start(t)
	ctx := context.Background()
	cfg := sys.RESTConfig(t)

	seen := &handlerView{rvs: versions{}}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset(t, cfg), 0, informers.WithNamespace(namespace))
	informer := factory.Core().V1().ConfigMaps().Informer()
	if _, err := informer.AddEventHandler(seen); err != nil {
		t.Fatalf("add event handler: %v", err)
	}
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	syncCtx, cancel := context.WithTimeout(ctx, convergeTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		t.Fatal("informer not synced")
	}

	var resent atomic.Int64
	retriable := func(err error) bool {
		return backendUnreachable(err) || answerCut(err) || connectionLost(err)
	}
	w := newWriter(clientset(t, cfg), namespace, retriable, &resent)
	var acked atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		writerDone <- func() error {
			for i := range writes {
				name := fmt.Sprintf("informed-%d", i%names)
				var err error
				switch round := i / names; round % 4 {
				case 0:
					err = w.create(ctx, name, fmt.Sprint(round))
				case 1, 2:
					err = w.update(ctx, name, fmt.Sprint(round))
				case 3:
					err = w.delete(ctx, name)
				}
				if err != nil {
					return err
				}
				acked.Add(1)
			}
			return nil
		}()
	}()

	restarts := []struct {
		service string
		after   int64
	}{
		{service: "core", after: writes / 4},
		{service: "gateway", after: writes / 2},
	}
	// writerErr is the writer's result once finished reads it: a writer
	// that fails early is reported as itself, not as a wait that timed out.
	var writerErr error
	finished := false
	for _, r := range restarts {
		if err := eventually(ctx, convergeTimeout, func(context.Context) error {
			if !finished {
				select {
				case writerErr = <-writerDone:
					finished = true
				default:
				}
			}
			if writerErr != nil {
				return nil
			}
			if n := acked.Load(); n < r.after {
				return fmt.Errorf("%d writes acknowledged, waiting for %d", n, r.after)
			}
			return nil
		}); err != nil {
			t.Fatalf("before killing %s: %v", r.service, err)
		}
		if writerErr != nil {
			t.Fatalf("writer, before killing %s: %v", r.service, writerErr)
		}
		t.Logf("killing %s after %d acknowledged writes", r.service, acked.Load())
		sys.KillService(t, r.service)
	}
	if !finished {
		writerErr = <-writerDone
	}
	if writerErr != nil {
		t.Fatalf("writer: %v", writerErr)
	}
	t.Logf("%d writes acknowledged, %d sent again after the gateway or core was unreachable", acked.Load(), resent.Load())

	lister := clientset(t, cfg)
	start := time.Now()
	err := eventually(ctx, convergeTimeout, func(ctx context.Context) error {
		fresh, err := listVersions(ctx, lister, namespace)
		if err != nil {
			return err
		}
		cached := versions{}
		for _, o := range informer.GetStore().List() {
			cm := o.(*corev1.ConfigMap)
			cached[cm.Name] = cm.ResourceVersion
		}
		if d := fresh.diff(cached); d != "" {
			return fmt.Errorf("informer cache differs from a fresh list: %s", d)
		}
		if d := fresh.diff(seen.snapshot()); d != "" {
			return fmt.Errorf("event handler's view differs from a fresh list: %s", d)
		}
		for name, rv := range w.acked {
			if fresh[name] != rv {
				return fmt.Errorf("acknowledged write of %s at rv %s lost: the list has %q", name, rv, fresh[name])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("informer caught up %v after the last write", time.Since(start).Round(time.Millisecond))
}

// handlerView is the state an informer's event handler builds from its
// notifications alone.
type handlerView struct {
	mu  sync.Mutex
	rvs versions
}

func (h *handlerView) OnAdd(obj any, _ bool) { h.set(obj) }
func (h *handlerView) OnUpdate(_, obj any)   { h.set(obj) }

func (h *handlerView) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	cm := obj.(*corev1.ConfigMap)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.rvs, cm.Name)
}

func (h *handlerView) set(obj any) {
	cm := obj.(*corev1.ConfigMap)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rvs[cm.Name] = cm.ResourceVersion
}

func (h *handlerView) snapshot() versions {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := make(versions, len(h.rvs))
	for k, rv := range h.rvs {
		v[k] = rv
	}
	return v
}

// TestCoreReplicaKilledUnderLoad runs two core replicas behind the
// gateway and SIGKILLs one while four clients read and write through the
// gateway. No read fails (the gateway sends it to the other replica); a
// write fails only with the gateway's 503 for an unreachable replica,
// which the client sends again, as a user would; and every acknowledged
// write is in the final list.
func TestCoreReplicaKilledUnderLoad(t *testing.T) {
	const (
		namespace  = "default"
		workers    = 4
		iterations = 40 // each: create, get, update, list, and every other one a delete
		victim     = "core-1"
		loadPrefix = "load-"
	)
	sys := harness.Start(t, harness.WithCoreReplicas(2))
	ctx := context.Background()
	cfg := sys.RESTConfig(t)

	var resent, reads atomic.Int64
	writers := make([]*writer, workers)
	for i := range writers {
		writers[i] = newWriter(clientset(t, cfg), namespace, backendUnreachable, &resent)
	}
	killUnderLoad(ctx, t, sys, victim, workers, iterations, func(ctx context.Context, i, k int) error {
		return loadIteration(ctx, writers[i], fmt.Sprintf("%s%d-", loadPrefix, i), k, &reads)
	})
	want := versions{}
	writes := 0
	for _, w := range writers {
		writes += w.writes
		for name, rv := range w.acked {
			want[name] = rv
		}
	}
	fresh, err := listVersions(ctx, clientset(t, cfg), namespace)
	if err != nil {
		t.Fatal(err)
	}
	for name := range fresh {
		if !strings.HasPrefix(name, loadPrefix) {
			delete(fresh, name)
		}
	}
	if d := want.diff(fresh); d != "" {
		t.Errorf("final list differs from the acknowledged writes: %s", d)
	}
	t.Logf("%d writes acknowledged (%d sent again after the gateway's 503 for the killed replica), %d reads, %d configmaps left as acknowledged",
		writes, resent.Load(), reads.Load(), len(want))
}

// killUnderLoad runs iterate for each of workers clients, iterations
// times, SIGKILLs victim once every client is halfway (half the load runs
// before the kill, half while the replica is down and comes back), waits
// for the launcher to replace it and the clients to finish, and reports
// the errors iterate returned: a readError and the load goes on, any
// other error ends that client.
func killUnderLoad(ctx context.Context, t *testing.T, sys *harness.System, victim string, workers, iterations int, iterate func(ctx context.Context, worker, k int) error) {
	t.Helper()
	var (
		halfway             atomic.Int64
		readErrs, writeErrs errorLog
		killed              = make(chan struct{})
		wg                  sync.WaitGroup
	)
	for i := range workers {
		wg.Go(func() {
			for k := range iterations {
				if k == iterations/2 {
					halfway.Add(1)
					<-killed
				}
				if err := iterate(ctx, i, k); err != nil {
					if _, ok := err.(readError); ok {
						readErrs.add(err)
						continue
					}
					writeErrs.add(err)
					return
				}
			}
		})
	}
	if err := eventually(ctx, convergeTimeout, func(context.Context) error {
		if n := halfway.Load(); n < int64(workers) {
			return fmt.Errorf("%d of %d workers halfway", n, workers)
		}
		return nil
	}); err != nil {
		close(killed)
		wg.Wait()
		t.Fatal(err)
	}
	pid := sys.PID(t, victim)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		close(killed)
		wg.Wait()
		t.Fatalf("kill %s (pid %d): %v", victim, pid, err)
	}
	close(killed)
	sys.WaitReplaced(t, victim, pid)
	wg.Wait()
	readErrs.report(t, "reads")
	writeErrs.report(t, "writes")
}

// readError is a read that failed; the load goes on after one, to count
// them all.
type readError struct{ error }

// loadIteration is iteration k of a worker whose names start with prefix:
// it creates a configmap, reads it back, updates it, lists the namespace,
// and every other iteration deletes the previous one.
func loadIteration(ctx context.Context, w *writer, prefix string, k int, reads *atomic.Int64) error {
	name := fmt.Sprintf("%s%d", prefix, k)
	if err := w.create(ctx, name, "created"); err != nil {
		return err
	}
	reads.Add(1)
	got, err := w.cs.CoreV1().ConfigMaps(w.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return readError{fmt.Errorf("get %s: %w", name, err)}
	}
	if got.ResourceVersion != w.acked[name] {
		return readError{fmt.Errorf("get %s: rv %s, want the acknowledged create's %s", name, got.ResourceVersion, w.acked[name])}
	}
	if err := w.update(ctx, name, "updated"); err != nil {
		return err
	}
	reads.Add(1)
	if _, err := w.cs.CoreV1().ConfigMaps(w.namespace).List(ctx, metav1.ListOptions{}); err != nil {
		return readError{fmt.Errorf("list: %w", err)}
	}
	if k%2 == 1 {
		return w.delete(ctx, fmt.Sprintf("%s%d", prefix, k-1))
	}
	return nil
}
