package load

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// setupTimeout bounds each unmeasured step: filling the namespace, opening
// the watches, tidying up after a round, deleting everything at the end.
const setupTimeout = 2 * time.Minute

// groupLabel puts every tenth object in group g0, which the selector list
// reads: 100 of 1,000 by default.
const groupLabel = "load.kplane.dev/group"

// side is one target during a run.
type side struct {
	target    Target
	client    kubernetes.Interface
	namespace string
	// mu guards created, the names the create workload made in this
	// round, which the delete workload deletes, and tried, every name it
	// tried to create, which tidy deletes.
	mu      sync.Mutex
	created []string
	tried   []string
}

// Run measures targets with the validated options o, in rounds that
// alternate between the targets, and deletes what it created even when ctx
// ends early.
func Run(ctx context.Context, o *Options, targets []Target, log *slog.Logger) (*Report, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	sides := make([]*side, 0, len(targets))
	defer func() {
		// Cleaning up must outlive a cancelled run: the namespace is ours.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), setupTimeout)
		defer cancel()
		for _, s := range sides {
			if err := s.teardown(cctx, o); err != nil {
				log.Error("delete load namespace", "target", s.target.Name, "namespace", s.namespace, "err", err)
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
		ns := o.Namespace
		if ns == "" {
			ns = "kplane-load-" + utilrand.String(6)
		}
		s := &side{target: t, client: client, namespace: ns}
		log.Info("fill namespace", "target", t.Name, "host", cfg.Host, "namespace", ns, "objects", o.Objects)
		if err := s.setup(ctx, o); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				// A half-made namespace is ours to delete.
				sides = append(sides, s)
			}
			return nil, fmt.Errorf("fill namespace %q of %s: %w", ns, t.Name, err)
		}
		sides = append(sides, s)
	}

	report := newReport(o, targets)
	for round := range o.Rounds {
		for i, s := range sides {
			for _, w := range workloads() {
				if !o.wants(w.name) {
					continue
				}
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				sample := w.run(ctx, o, s, round)
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
	report.summarize()
	return report, nil
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

func (s *side) setup(ctx context.Context, o *Options) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create namespace: %w", err)
	}
	payload := strings.Repeat("x", o.ObjectSize)
	return parallel(ctx, o.Workers, o.Objects, func(ctx context.Context, i int) error {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:   objectName(i),
				Labels: map[string]string{groupLabel: "g" + strconv.Itoa(i%10)},
			},
			Data: map[string]string{"payload": payload},
		}
		_, err := s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
		return err
	})
}

// tidy deletes what create made in this round and delete left.
func (s *side) tidy(ctx context.Context, o *Options) error {
	s.mu.Lock()
	names := s.tried
	s.created, s.tried = nil, nil
	s.mu.Unlock()
	return parallel(ctx, o.Workers, len(names), func(ctx context.Context, i int) error {
		return s.deleteObject(ctx, names[i])
	})
}

// teardown deletes the objects, then the namespace. The objects go one by
// one because a server without a namespace controller (the reference
// server has none) never empties a deleted namespace.
func (s *side) teardown(ctx context.Context, o *Options) error {
	if err := s.tidy(ctx, o); err != nil {
		return err
	}
	if err := parallel(ctx, o.Workers, o.Objects, func(ctx context.Context, i int) error {
		return s.deleteObject(ctx, objectName(i))
	}); err != nil {
		return err
	}
	err := s.client.CoreV1().Namespaces().Delete(ctx, s.namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (s *side) deleteObject(ctx context.Context, name string) error {
	err := s.client.CoreV1().ConfigMaps(s.namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete configmap %q: %w", name, err)
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
