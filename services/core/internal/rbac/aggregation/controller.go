package aggregation

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Controller keeps aggregated ClusterRoles' rules.
type Controller struct {
	kube kubernetes.Interface
	log  *slog.Logger
}

// Option configures a Controller.
type Option func(*Controller)

// WithLogger sets where the controller logs.
func WithLogger(l *slog.Logger) Option { return func(c *Controller) { c.log = l } }

// New returns a controller acting through kube.
func New(kube kubernetes.Interface, opts ...Option) *Controller {
	c := &Controller{kube: kube, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Run keeps the aggregated roles until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(c.kube, 10*time.Minute)
	roles := factory.Rbac().V1().ClusterRoles()
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterrole-aggregation"},
	)
	defer queue.ShutDown()
	// Any role's change may change what any aggregated role selects, so
	// every change queues every aggregated role, as kube's controller.
	enqueueAll := func(any) {
		all, err := roles.Lister().List(labels.Everything())
		if err != nil {
			return
		}
		for _, r := range all {
			if r.AggregationRule != nil {
				queue.Add(r.Name)
			}
		}
	}
	if _, err := roles.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueAll,
		UpdateFunc: func(_, obj any) { enqueueAll(obj) },
		DeleteFunc: enqueueAll,
	}); err != nil {
		return fmt.Errorf("watch clusterroles: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("sync informer of %s", typ)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for c.work(ctx, queue, roles.Lister()) {
		}
	}()
	<-ctx.Done()
	queue.ShutDown()
	<-done
	return nil
}

func (c *Controller) work(ctx context.Context, queue workqueue.TypedRateLimitingInterface[string], lister rbaclisters.ClusterRoleLister) bool {
	name, quit := queue.Get()
	if quit {
		return false
	}
	defer queue.Done(name)
	if err := c.sync(ctx, lister, name); err != nil {
		if ctx.Err() == nil {
			c.log.Info("aggregate clusterrole, retrying", "clusterrole", name, "err", err)
		}
		queue.AddRateLimited(name)
		return true
	}
	queue.Forget(name)
	return true
}

// sync writes the aggregated rules of cluster role name.
func (c *Controller) sync(ctx context.Context, lister rbaclisters.ClusterRoleLister, name string) error {
	role, err := lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	rules, err := Rules(lister, role)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	// A merge patch of rules alone does not conflict with writes of the
	// role's other fields; a stale read is corrected by the update event
	// it causes.
	patch, err := json.Marshal(map[string]any{"rules": rules})
	if err != nil {
		return fmt.Errorf("encode rules of clusterrole %s: %w", name, err)
	}
	if _, err := c.kube.RbacV1().ClusterRoles().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch clusterrole %s: %w", name, err)
	}
	return nil
}

// Rules is the union of the rules of the roles role's aggregation rule
// selects, role itself aside, in kube's order: selector by selector,
// roles by name, each rule once.
func Rules(lister rbaclisters.ClusterRoleLister, role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	rules := []rbacv1.PolicyRule{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			return nil, fmt.Errorf("selector %d of clusterrole %s: %w", i, role.Name, err)
		}
		selected, err := lister.List(selector)
		if err != nil {
			return nil, err
		}
		slices.SortFunc(selected, func(a, b *rbacv1.ClusterRole) int { return strings.Compare(a.Name, b.Name) })
		for _, s := range selected {
			if s.Name == role.Name {
				continue
			}
			for _, r := range s.Rules {
				if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(have, r) }) {
					rules = append(rules, r)
				}
			}
		}
	}
	return rules, nil
}
