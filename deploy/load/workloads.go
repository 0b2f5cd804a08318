package load

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// workload is one kind of traffic; run measures one round of it on a side.
type workload struct {
	name string
	run  func(ctx context.Context, o *Options, s *side, round int) Sample
}

// workloads are all workloads in the order a round runs them: the lists
// before create, so that they read exactly the objects made at setup, and
// delete after create, whose objects it deletes; the same for the cr-
// workloads on custom resources.
func workloads() []workload {
	return []workload{
		{"get", opWorkload(get)},
		{"update", opWorkload(update)},
		{"patch", opWorkload(patch)},
		{"apply", opWorkload(apply)},
		{"list", opWorkload(list(metav1.ListOptions{}, (*Options).inFirstNamespace))},
		{"list-rv0", opWorkload(list(metav1.ListOptions{ResourceVersion: "0"}, (*Options).inFirstNamespace))},
		{"list-selector", opWorkload(list(metav1.ListOptions{LabelSelector: groupLabel + "=g0"}, func(o *Options) int { return (o.inFirstNamespace() + 9) / 10 }))},
		{"list-paged", opWorkload(listPaged)},
		{"list-all-namespaces", opWorkload(listAllNamespaces)},
		{"watch", watchWorkload},
		{"create", opWorkload(create)},
		{"delete", opWorkload(remove)},
		{"cr-get", opWorkload(crGet)},
		{"cr-update", opWorkload(crUpdate)},
		{"cr-list", opWorkload(crList)},
		{"cr-create", opWorkload(crCreate)},
		{"cr-delete", opWorkload(crDelete)},
	}
}

// customResourcePrefix starts the names of the workloads on custom
// resources, for which setup makes a CRD and its objects.
const customResourcePrefix = "cr-"

func (o *Options) wantsCustomResources() bool {
	return slices.ContainsFunc(o.Workloads, func(w string) bool { return strings.HasPrefix(w, customResourcePrefix) })
}

// WorkloadNames are the workloads in the order a round runs them.
func WorkloadNames() []string {
	all := workloads()
	names := make([]string, len(all))
	for i, w := range all {
		names[i] = w.name
	}
	return names
}

// op is one measured request (or two, for update) by worker number worker,
// the seq-th of the round on this side; done reports that there is nothing
// left to do.
type op func(ctx context.Context, o *Options, s *side, round, worker, seq int) (done bool, err error)

// opWorkload runs f on o.Workers goroutines until the round's time or
// count is up.
func opWorkload(f op) func(ctx context.Context, o *Options, s *side, round int) Sample {
	return func(ctx context.Context, o *Options, s *side, round int) Sample {
		ctx, cancel := context.WithTimeout(ctx, o.Duration)
		defer cancel()
		var next atomic.Int64
		rec := make([]recorder, o.Workers)
		start := time.Now()
		var wg sync.WaitGroup
		for w := range o.Workers {
			wg.Go(func() {
				for ctx.Err() == nil {
					seq := int(next.Add(1) - 1)
					if o.Count > 0 && seq >= o.Count {
						return
					}
					t0 := time.Now()
					done, err := f(ctx, o, s, round, w, seq)
					if done {
						return
					}
					if err != nil && ctx.Err() != nil {
						// Cut off by the end of the round: not the server's failure.
						return
					}
					rec[w].record(time.Since(t0), err)
				}
			})
		}
		wg.Wait()
		return merge(rec, time.Since(start))
	}
}

// worker w owns objects w, w+workers, w+2*workers, ... for writes, so
// that workers never conflict with each other.
func ownObject(o *Options, worker, seq int) int {
	owned := (o.Objects - worker + o.Workers - 1) / o.Workers
	return worker + (seq%owned)*o.Workers
}

func get(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
	ref := s.object(o, rand.IntN(o.Objects))
	_, err := s.client.CoreV1().ConfigMaps(ref.namespace).Get(ctx, ref.name, metav1.GetOptions{})
	return false, err
}

func update(ctx context.Context, o *Options, s *side, _, worker, seq int) (bool, error) {
	ref := s.object(o, ownObject(o, worker, seq))
	cms := s.client.CoreV1().ConfigMaps(ref.namespace)
	cm, err := cms.Get(ctx, ref.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	cm.Data["seq"] = strconv.Itoa(seq)
	_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	return false, err
}

func patch(ctx context.Context, o *Options, s *side, _, worker, seq int) (bool, error) {
	ref := s.object(o, ownObject(o, worker, seq))
	body := fmt.Appendf(nil, `{"data":{"seq":%q}}`, strconv.Itoa(seq))
	_, err := s.client.CoreV1().ConfigMaps(ref.namespace).Patch(ctx, ref.name, types.MergePatchType, body, metav1.PatchOptions{})
	return false, err
}

// applyManager is the field manager of the apply workload.
const applyManager = "kplane-load"

// apply sets data.seq by server-side apply, forcing the field from the
// fill's manager the first time.
func apply(ctx context.Context, o *Options, s *side, _, worker, seq int) (bool, error) {
	ref := s.object(o, ownObject(o, worker, seq))
	body := fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"seq":%q}}`, ref.name, strconv.Itoa(seq))
	force := true
	_, err := s.client.CoreV1().ConfigMaps(ref.namespace).Patch(ctx, ref.name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: applyManager, Force: &force})
	return false, err
}

// listPaged reads every object made at setup in the first namespace in
// pages of o.PageSize, following the continue tokens as client-go's pager
// does; one operation is the whole list.
func listPaged(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
	opts := metav1.ListOptions{Limit: int64(o.PageSize)}
	n := 0
	for {
		l, err := s.client.CoreV1().ConfigMaps(s.namespaces[0]).List(ctx, opts)
		if err != nil {
			return false, err
		}
		for _, cm := range l.Items {
			if _, ok := cm.Labels[groupLabel]; ok {
				n++
			}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if n != o.inFirstNamespace() {
		return false, fmt.Errorf("paged list of %d: %d configmaps, want %d", o.PageSize, n, o.inFirstNamespace())
	}
	return false, nil
}

// list reads the first namespace with opts and counts the objects made at
// setup among the answer, since a fast wrong answer would look like a win;
// others, such as the kube-root-ca.crt a controller adds, are not counted.
func list(opts metav1.ListOptions, want func(*Options) int) op {
	return func(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
		l, err := s.client.CoreV1().ConfigMaps(s.namespaces[0]).List(ctx, opts)
		if err != nil {
			return false, err
		}
		n := 0
		for _, cm := range l.Items {
			if _, ok := cm.Labels[groupLabel]; ok {
				n++
			}
		}
		if n != want(o) {
			return false, fmt.Errorf("list with resourceVersion %q and selector %q: %d configmaps, want %d", opts.ResourceVersion, opts.LabelSelector, n, want(o))
		}
		return false, nil
	}
}

// listAllNamespaces reads the ConfigMaps of every namespace that carry
// this run's label, all those made at setup, wherever the server keeps
// other ConfigMaps.
func listAllNamespaces(ctx context.Context, o *Options, s *side, _, _, _ int) (bool, error) {
	l, err := s.client.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: runLabel + "=" + s.namespaces[0]})
	if err != nil {
		return false, err
	}
	if len(l.Items) != o.Objects {
		return false, fmt.Errorf("list of every namespace with selector %s=%s: %d configmaps, want %d", runLabel, s.namespaces[0], len(l.Items), o.Objects)
	}
	return false, nil
}

// create makes ConfigMaps in one namespace after the other.
func create(ctx context.Context, o *Options, s *side, round, _, seq int) (bool, error) {
	ref := s.createdObject(round, seq)
	return false, s.configMaps.create(ref, func() error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ref.name},
			Data:       map[string]string{"payload": fmt.Sprintf("%0*d", o.ObjectSize, seq)},
		}
		_, err := s.client.CoreV1().ConfigMaps(ref.namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
}

// remove deletes the objects create made this round, the seq-th by the
// seq-th call, and is done when none is left.
func remove(ctx context.Context, _ *Options, s *side, _, _, seq int) (bool, error) {
	ref, ok := s.configMaps.nth(seq)
	if !ok {
		return true, nil
	}
	return false, s.client.CoreV1().ConfigMaps(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
}

// deliveryTimeout bounds the wait for one update to reach every watcher.
const deliveryTimeout = 10 * time.Second

// watchWorkload opens o.Watchers watches on one object and updates it
// again and again, each time once every watcher has seen the last update;
// a delivery's latency runs from just before the update is sent to its
// event's arrival, read on this machine's clock on both ends.
func watchWorkload(ctx context.Context, o *Options, s *side, _ int) Sample {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout+o.Duration)
	defer cancel()
	rec := make([]recorder, o.Watchers)
	cms := s.client.CoreV1().ConfigMaps(s.namespaces[0])
	target, err := cms.Get(ctx, objectName(0), metav1.GetOptions{})
	if err != nil {
		return failed(err)
	}
	watches := make([]watch.Interface, 0, o.Watchers)
	var wg sync.WaitGroup
	defer func() {
		for _, w := range watches {
			w.Stop()
		}
		wg.Wait()
	}()
	// Each watch starts with the object's current state, as an ADDED
	// event: once every watcher has had it, every watch is registered and
	// will see the updates. Watching from a given resourceVersion instead
	// would depend on how much history a server's watch cache keeps.
	ready := make(chan struct{}, o.Watchers)
	delivered := make(chan int, o.Watchers)
	opts := metav1.ListOptions{ResourceVersion: "0", FieldSelector: "metadata.name=" + target.Name}
	for i := range o.Watchers {
		w, err := cms.Watch(ctx, opts)
		if err != nil {
			return failed(fmt.Errorf("open watch %d: %w", i, err))
		}
		watches = append(watches, w)
		wg.Go(func() {
			for ev := range w.ResultChan() {
				switch ev.Type {
				case watch.Error:
					if ctx.Err() != nil {
						return // the end of the workload, not the server's failure
					}
					rec[i].record(0, fmt.Errorf("watch %d: %w", i, apierrors.FromObject(ev.Object)))
					return
				case watch.Added:
					select {
					case ready <- struct{}{}:
					case <-ctx.Done():
						return
					}
					continue
				case watch.Modified:
				default:
					continue
				}
				cm, ok := ev.Object.(*corev1.ConfigMap)
				if !ok {
					continue
				}
				sent, err := strconv.ParseInt(cm.Data["sent"], 10, 64)
				if err != nil {
					continue
				}
				seq, _ := strconv.Atoi(cm.Data["seq"])
				rec[i].record(time.Since(time.Unix(0, sent)), nil)
				select {
				case delivered <- seq:
				case <-ctx.Done():
					return
				}
			}
		})
	}
	for i := range o.Watchers {
		select {
		case <-ready:
		case <-ctx.Done():
			return failed(fmt.Errorf("%d of %d watches started: %w", i, o.Watchers, ctx.Err()))
		}
	}

	start := time.Now()
	var failures recorder
	for seq := 0; time.Since(start) < o.Duration; seq++ {
		if o.Count > 0 && seq*o.Watchers >= o.Count {
			break
		}
		target.Data["seq"] = strconv.Itoa(seq)
		target.Data["sent"] = strconv.FormatInt(time.Now().UnixNano(), 10)
		if target, err = cms.Update(ctx, target, metav1.UpdateOptions{}); err != nil {
			failures.record(0, fmt.Errorf("update watched object: %w", err))
			break
		}
		if err := awaitDeliveries(ctx, delivered, seq, o.Watchers); err != nil {
			failures.record(0, err)
			break
		}
	}
	elapsed := time.Since(start)
	// Cancelling frees watchers blocked on reporting a delivery that no
	// one waits for any more, after a delivery timed out.
	cancel()
	for _, w := range watches {
		w.Stop()
	}
	wg.Wait()
	watches = nil
	return merge(append(rec, failures), elapsed)
}

// awaitDeliveries waits until n watchers report update seq; reports of
// earlier updates are late arrivals already counted.
func awaitDeliveries(ctx context.Context, delivered <-chan int, seq, n int) error {
	timeout := time.NewTimer(deliveryTimeout)
	defer timeout.Stop()
	for got := 0; got < n; {
		select {
		case s := <-delivered:
			if s == seq {
				got++
			}
		case <-timeout.C:
			return fmt.Errorf("update %d reached %d of %d watchers in %v", seq, got, n, deliveryTimeout)
		case <-ctx.Done():
			return fmt.Errorf("update %d reached %d of %d watchers: %w", seq, got, n, ctx.Err())
		}
	}
	return nil
}

func failed(err error) Sample {
	var r recorder
	r.record(0, err)
	return merge([]recorder{r}, 0)
}
