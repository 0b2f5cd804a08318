package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// setupTimeout bounds each unmeasured step: filling the namespaces,
// making the custom resources, opening the watches, tidying up after a
// round, deleting everything at the end.
const setupTimeout = 2 * time.Minute

// perObjectTimeout is what a step that makes or deletes every one of
// --objects gets on top of setupTimeout: enough for 200 objects a second,
// which 100,000 objects on a slow server need.
const perObjectTimeout = 5 * time.Millisecond

// bulkTimeout bounds a step over every one of the objects.
func (o *Options) bulkTimeout() time.Duration {
	return setupTimeout + time.Duration(o.Objects)*perObjectTimeout
}

// groupLabel puts every tenth object in group g0, which the selector list
// reads: 100 of 1,000 by default.
const groupLabel = "load.kplane.dev/group"

// runLabel names the side's first namespace on every object made at setup,
// so that list-all-namespaces reads this run's objects and nothing else
// on the server.
const runLabel = "load.kplane.dev/run"

// side is one target during a run.
type side struct {
	target Target
	client kubernetes.Interface
	// crds makes the CRD of the cr- workloads; widgets reads and writes
	// its objects.
	crds    apiextensionsclient.Interface
	widgets dynamic.NamespaceableResourceInterface
	// namespaces are the side's, the first named by --namespace. made[i]
	// says that setup created namespaces[i], which teardown then empties
	// and deletes; each is written by one goroutine of setup only.
	namespaces []string
	made       []bool
	// ownsCRD says that setup created the CRD, which teardown deletes
	// last; a CRD that was there already stays.
	ownsCRD bool
	// configMaps and customResources are what create and cr-create did
	// in this round.
	configMaps, customResources creations
}

// objectRef names an object in one of the side's namespaces.
type objectRef struct{ namespace, name string }

// creations are the objects a create workload tried to make in a round,
// which tidy deletes, and those it made, which the matching delete
// workload deletes.
type creations struct {
	mu      sync.Mutex
	tried   []objectRef
	created []objectRef
}

// create calls f to create ref and records ref as made if it did. A create
// cut off by the end of the round may still have happened: ref is recorded
// as tried first.
func (c *creations) create(ref objectRef, f func() error) error {
	c.mu.Lock()
	c.tried = append(c.tried, ref)
	c.mu.Unlock()
	if err := f(); err != nil {
		return err
	}
	c.mu.Lock()
	c.created = append(c.created, ref)
	c.mu.Unlock()
	return nil
}

// nth is the seq-th object made in this round, if there are that many.
func (c *creations) nth(seq int) (objectRef, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq >= len(c.created) {
		return objectRef{}, false
	}
	return c.created[seq], true
}

// take returns every object tried in this round and starts the next.
func (c *creations) take() []objectRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	tried := c.tried
	c.tried, c.created = nil, nil
	return tried
}

// Run measures targets with the validated options o, in rounds that
// alternate between the targets, and deletes what it created even when ctx
// ends early.
func Run(ctx context.Context, o *Options, targets []Target, log *slog.Logger) (*Report, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// A pattern that matches nothing fails the run before the fill.
	for _, p := range o.processes(targets) {
		if _, _, err := p.sample(); err != nil {
			return nil, err
		}
	}
	sides := make([]*side, 0, len(targets))
	defer func() {
		// Cleaning up must outlive a cancelled run: the namespaces are ours.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.bulkTimeout())
		defer cancel()
		// Last made, first deleted: a side may use the CRD that an
		// earlier side on the same server made and deletes.
		for _, s := range slices.Backward(sides) {
			if err := s.teardown(cctx, o); err != nil {
				log.Error("delete load namespaces", "target", s.target.Name, "namespace", s.namespaces[0], "err", err)
			}
		}
	}()
	for _, t := range targets {
		cfg := rest.CopyConfig(t.Config)
		// The tool measures the server, not client-go's rate limiter.
		cfg.QPS, cfg.Burst = -1, 0
		cfg.ContentType = "application/json"
		cfg.AcceptContentTypes = "application/json"
		if o.Protobuf {
			cfg.ContentType = "application/vnd.kubernetes.protobuf"
			cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("client of %s: %w", t.Name, err)
		}
		// Kube serves custom resources in JSON only; the dynamic client
		// speaks JSON whatever cfg says, and the CRD, made once at setup,
		// is not measured.
		dyn, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("dynamic client of %s: %w", t.Name, err)
		}
		jsonCfg := rest.CopyConfig(cfg)
		jsonCfg.ContentType, jsonCfg.AcceptContentTypes = "application/json", "application/json"
		crds, err := apiextensionsclient.NewForConfig(jsonCfg)
		if err != nil {
			return nil, fmt.Errorf("apiextensions client of %s: %w", t.Name, err)
		}
		ns := o.Namespace
		if ns == "" {
			ns = "kplane-load-" + utilrand.String(6)
		}
		s := &side{
			target: t, client: client, crds: crds, widgets: dyn.Resource(widgetsResource),
			namespaces: namespaceNames(ns, o.Namespaces), made: make([]bool, o.Namespaces),
		}
		// Teardown deletes only what setup made, so a side that failed
		// halfway is torn down too.
		sides = append(sides, s)
		log.Info("fill namespaces", "target", t.Name, "host", cfg.Host, "namespace", ns, "namespaces", o.Namespaces, "objects", o.Objects)
		if err := s.setup(ctx, o); err != nil {
			return nil, fmt.Errorf("fill namespace %q of %s: %w", ns, t.Name, err)
		}
	}

	var memory *memoryWatch
	if watched := o.processes(targets); len(watched) > 0 {
		var err error
		if memory, err = watchMemory(ctx, watched); err != nil {
			return nil, err
		}
		// A run that ends early stops sampling too.
		defer memory.stop()
	}
	report := newReport(o, targets)
	cpu := o.sideProcesses(targets)
	for round := range o.Rounds {
		for _, i := range roundOrder(len(sides), round) {
			s := sides[i]
			for _, w := range workloads() {
				if !o.wants(w.name) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				sample := measureCPU(cpu[i], func() Sample { return w.run(ctx, o, s, round) })
				log.Info("round", "target", s.target.Name, "round", round+1, "workload", w.name,
					"ops", sample.Ops, "ops_per_second", sample.OpsPerSecond, "p50_ms", sample.P50Ms, "p99_ms", sample.P99Ms, "errors", sample.Errors)
				report.add(w.name, i, sample)
			}
			// Whatever create made and delete did not remove would change
			// what the next round's lists read.
			tctx, cancel := context.WithTimeout(ctx, setupTimeout)
			err := s.tidy(tctx, o)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("delete created objects of %s: %w", s.target.Name, err)
			}
		}
	}
	if memory != nil {
		report.Memory = memory.finish()
	}
	report.summarize()
	return report, nil
}

// roundOrder is the order the sides run their workloads in round:
// A then B, then B then A, and so on. A side's round after the other
// side's shares the machine with what that side still does after its
// round (deletes to finish, changes to publish, garbage to collect): in
// the same order every round, a comparison of kplane with itself put the
// first side 2-7% ahead.
func roundOrder(sides, round int) []int {
	order := make([]int, sides)
	for i := range order {
		order[i] = i
	}
	if round%2 == 1 {
		slices.Reverse(order)
	}
	return order
}

// processes are the sides whose processes' memory the run samples.
func (o *Options) processes(targets []Target) []*processes {
	var out []*processes
	for _, p := range o.sideProcesses(targets) {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}

// sideProcesses are each target's processes, nil for one whose were not
// named.
func (o *Options) sideProcesses(targets []Target) []*processes {
	out := make([]*processes, len(targets))
	for i, pattern := range []string{o.Processes, o.CompareProcesses} {
		if pattern == "" || i >= len(targets) {
			continue
		}
		// Validate compiled the pattern.
		out[i], _ = newProcesses(targets[i].Name, pattern)
	}
	return out
}

// measureCPU runs a round and, when its side's processes are named, sets
// the CPU time, the context switches and the time waiting for a CPU they
// spent in it per operation, in all and by program. A process that starts or ends during the round
// skews it; one that cannot be read leaves the round unmeasured.
func measureCPU(p *processes, round func() Sample) Sample {
	if p == nil {
		return round()
	}
	before, err := p.costs()
	sample := round()
	if err != nil || sample.Ops == 0 {
		return sample
	}
	after, err := p.costs()
	if err != nil {
		return sample
	}
	ops := float64(sample.Ops)
	var cpu, wait float64
	var switches int64
	cpuByProgram, switchesByProgram, waitByProgram := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for name, c := range after {
		if d := c.waitSeconds - before[name].waitSeconds; d > 0 {
			waitByProgram[name] = d * 1e6 / ops
			wait += d
		}
		if d := c.cpuSeconds - before[name].cpuSeconds; d > 0 {
			cpuByProgram[name] = d * 1e6 / ops
			cpu += d
		}
		if d := c.switches - before[name].switches; d > 0 {
			switchesByProgram[name] = float64(d) / ops
			switches += d
		}
	}
	if cpu > 0 {
		sample.CPUMicrosPerOp = cpu * 1e6 / ops
		sample.CPUMicrosPerOpByProgram = cpuByProgram
		sample.SwitchesPerOp = float64(switches) / ops
		sample.SwitchesPerOpByProgram = switchesByProgram
		if wait > 0 {
			sample.WaitMicrosPerOp = wait * 1e6 / ops
			sample.WaitMicrosPerOpByProgram = waitByProgram
		}
	}
	return sample
}

func (o *Options) wants(name string) bool {
	for _, w := range o.Workloads {
		if w == name {
			return true
		}
	}
	return false
}

func objectName(i int) string { return fmt.Sprintf("obj-%05d", i) }

// object is object i of those made at setup.
func (s *side) object(o *Options, i int) objectRef {
	return objectRef{namespace: s.namespaces[o.namespaceIndex(i)], name: objectName(i)}
}

// labels are those of object i made at setup: its group and the run.
func (s *side) labels(i int) map[string]string {
	return map[string]string{groupLabel: "g" + strconv.Itoa(i%10), runLabel: s.namespaces[0]}
}

// createdObject is what create and cr-create make as their seq-th object
// of round: one namespace after the other.
func (s *side) createdObject(round, seq int) objectRef {
	return objectRef{namespace: s.namespaces[seq%len(s.namespaces)], name: fmt.Sprintf("created-%d-%06d", round, seq)}
}

func (s *side) setup(ctx context.Context, o *Options) error {
	if err := s.setupConfigMaps(ctx, o); err != nil {
		return err
	}
	if !o.wantsCustomResources() {
		return nil
	}
	return s.setupCustomResources(ctx, o, strings.Repeat("x", o.ObjectSize))
}

// setupConfigMaps makes the namespaces and fills them with ConfigMaps.
func (s *side) setupConfigMaps(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, o.bulkTimeout())
	defer cancel()
	if err := parallel(ctx, o.Workers, len(s.namespaces), func(ctx context.Context, i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespaces[i]}}
		if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create namespace %q: %w", ns.Name, err)
		}
		s.made[i] = true
		return nil
	}); err != nil {
		return err
	}
	payload := strings.Repeat("x", o.ObjectSize)
	return parallel(ctx, o.Workers, o.Objects, func(ctx context.Context, i int) error {
		ref := s.object(o, i)
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: ref.name, Labels: s.labels(i)},
			Data:       map[string]string{"payload": payload},
		}
		_, err := s.client.CoreV1().ConfigMaps(ref.namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
}

// tidy deletes what create and cr-create made in this round and delete
// and cr-delete left.
func (s *side) tidy(ctx context.Context, o *Options) error {
	cms, crs := s.configMaps.take(), s.customResources.take()
	if err := parallel(ctx, o.Workers, len(cms), func(ctx context.Context, i int) error {
		return s.deleteConfigMap(ctx, cms[i])
	}); err != nil {
		return err
	}
	return parallel(ctx, o.Workers, len(crs), func(ctx context.Context, i int) error {
		return s.deleteCustomResource(ctx, crs[i])
	})
}

// teardown deletes the objects in the namespaces setup made, then those
// namespaces, then the CRD if setup made it; each step is tried even when
// one before failed, so that as little as possible stays behind. The
// objects go one by one because a server without a namespace controller
// (the reference server has none) never empties a deleted namespace.
func (s *side) teardown(ctx context.Context, o *Options) error {
	tidied := s.tidy(ctx, o)
	customResources := o.wantsCustomResources()
	emptied := parallel(ctx, o.Workers, o.Objects, func(ctx context.Context, i int) error {
		if !s.made[o.namespaceIndex(i)] {
			return nil
		}
		ref := s.object(o, i)
		if err := s.deleteConfigMap(ctx, ref); err != nil {
			return err
		}
		if !customResources {
			return nil
		}
		return s.deleteCustomResource(ctx, ref)
	})
	deleted := parallel(ctx, o.Workers, len(s.namespaces), func(ctx context.Context, i int) error {
		if !s.made[i] {
			return nil
		}
		err := s.client.CoreV1().Namespaces().Delete(ctx, s.namespaces[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %q: %w", s.namespaces[i], err)
		}
		return nil
	})
	var crd error
	if s.ownsCRD {
		crd = s.deleteCRD(ctx)
	}
	return errors.Join(tidied, emptied, deleted, crd)
}

func (s *side) deleteConfigMap(ctx context.Context, ref objectRef) error {
	err := s.client.CoreV1().ConfigMaps(ref.namespace).Delete(ctx, ref.name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete configmap %s/%s: %w", ref.namespace, ref.name, err)
	}
	return nil
}

// parallel calls f for 0..n-1 on workers goroutines and returns the first
// error, after which it starts no more calls.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := f(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}
