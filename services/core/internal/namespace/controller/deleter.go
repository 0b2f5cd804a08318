package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"

	"kplane.dev/services/core/internal/apiclient"
)

// NamespaceDeleter empties namespaces being deleted, as
// kube-controller-manager's namespace controller: it deletes every
// object of every namespaced resource discovery lists, reports progress
// in the namespace's status conditions, and once nothing is left removes
// the "kubernetes" finalizer so the namespace goes.
type NamespaceDeleter struct {
	clients *apiclient.Clients
	log     *slog.Logger
	workers int
	base    time.Duration
	limit   time.Duration
	clock   func() time.Time
}

// DeleterOption configures a NamespaceDeleter.
type DeleterOption func(*NamespaceDeleter)

// WithDeleterLogger sets where the deleter logs.
func WithDeleterLogger(l *slog.Logger) DeleterOption {
	return func(d *NamespaceDeleter) { d.log = l }
}

// WithDeleterBackoff sets how long a namespace that is not empty yet
// waits before the next attempt: base, doubling up to limit.
func WithDeleterBackoff(base, limit time.Duration) DeleterOption {
	return func(d *NamespaceDeleter) { d.base, d.limit = base, limit }
}

// NewNamespaceDeleter returns the deleter acting through clients.
func NewNamespaceDeleter(clients *apiclient.Clients, opts ...DeleterOption) *NamespaceDeleter {
	d := &NamespaceDeleter{
		clients: clients,
		log:     slog.New(slog.DiscardHandler),
		workers: 2,
		base:    time.Second,
		limit:   5 * time.Minute,
		clock:   time.Now,
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Run empties and finalizes namespaces being deleted until ctx ends.
func (d *NamespaceDeleter) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(d.clients.Kube, 10*time.Minute)
	queue := newQueue("namespace-deleter", d.base, d.limit)
	_, err := factory.Core().V1().Namespaces().Informer().AddEventHandler(enqueue(queue, func(obj any) (string, bool) {
		ns, ok := obj.(*corev1.Namespace)
		return ns.GetName(), ok && ns.DeletionTimestamp != nil
	}))
	if err != nil {
		return fmt.Errorf("watch namespaces: %w", err)
	}
	return run(ctx, d.log, factory, queue, d.workers, d.sync)
}

// errContentRemains retries a namespace whose content is not all gone.
var errContentRemains = errors.New("content remains")

// sync empties namespace name if it is being deleted and finalizes it
// once empty. It reads the namespace live: the informer may lag behind a
// finalize this controller just made.
func (d *NamespaceDeleter) sync(ctx context.Context, name string) error {
	ns, err := d.clients.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read namespace %q: %w", name, err)
	}
	if ns.DeletionTimestamp == nil || !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		return nil
	}
	conds := &conditions{}
	remains, err := d.deleteContent(ctx, name, conds)
	if err := d.updateConditions(ctx, ns, conds); err != nil {
		return err
	}
	if err != nil {
		return err
	}
	if remains {
		return errContentRemains
	}
	return d.finalize(ctx, ns)
}

// deleteContent deletes every object in namespace ns and reports
// whether any remain, recording what went wrong in conds.
func (d *NamespaceDeleter) deleteContent(ctx context.Context, ns string, conds *conditions) (bool, error) {
	d.clients.Discovery.Invalidate()
	lists, derr := discovery.ServerPreferredNamespacedResources(d.clients.Discovery)
	if derr != nil {
		conds.discoveryFailed(derr)
	}
	deletable := discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list"}}, lists)
	gvrs, perr := discovery.GroupVersionResources(deletable)
	if perr != nil {
		conds.parseFailed(perr)
	}
	collection := map[schema.GroupVersionResource]bool{}
	for _, l := range deletable {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			collection[gv.WithResource(r.Name)] = slices.Contains(r.Verbs, "deletecollection")
		}
	}
	remaining := false
	for gvr := range gvrs {
		left, err := d.deleteAll(ctx, ns, gvr, collection[gvr])
		if err != nil {
			conds.contentFailed(err)
			remaining = true
			continue
		}
		conds.remaining(gvr, left)
		remaining = remaining || len(left) != 0
	}
	if derr != nil || perr != nil {
		// Resources that could not be found may still hold content.
		return true, errors.Join(derr, perr)
	}
	return remaining, nil
}

// deleteAll deletes the objects of gvr in ns and returns the finalizers
// of each object left.
func (d *NamespaceDeleter) deleteAll(ctx context.Context, ns string, gvr schema.GroupVersionResource, collection bool) ([][]string, error) {
	client := d.clients.Metadata.Resource(gvr).Namespace(ns)
	background := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &background}
	if collection {
		err := client.DeleteCollection(ctx, opts, metav1.ListOptions{})
		switch {
		case err == nil:
		case apierrors.IsMethodNotSupported(err), apierrors.IsNotFound(err):
			collection = false
		default:
			return nil, fmt.Errorf("delete collection of %s: %w", gvr, err)
		}
	}
	list, err := client.List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
		// The resource went away since discovery.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr, err)
	}
	var left [][]string
	for _, item := range list.Items {
		if !collection && item.DeletionTimestamp == nil {
			err := client.Delete(ctx, item.Name, opts)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return nil, fmt.Errorf("delete %s %q: %w", gvr, item.Name, err)
			}
		}
		left = append(left, item.Finalizers)
	}
	return left, nil
}

// updateConditions writes conds into ns's status when they change it.
func (d *NamespaceDeleter) updateConditions(ctx context.Context, ns *corev1.Namespace, conds *conditions) error {
	updated := ns.DeepCopy()
	if !conds.apply(&updated.Status, metav1.NewTime(d.clock())) {
		return nil
	}
	_, err := d.clients.Kube.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of namespace %q: %w", ns.Name, err)
	}
	return nil
}

// finalize removes the "kubernetes" finalizer, retrying on conflicts
// with a fresh read.
func (d *NamespaceDeleter) finalize(ctx context.Context, ns *corev1.Namespace) error {
	for {
		updated := ns.DeepCopy()
		updated.Spec.Finalizers = slices.DeleteFunc(updated.Spec.Finalizers, func(f corev1.FinalizerName) bool { return f == corev1.FinalizerKubernetes })
		_, err := d.clients.Kube.CoreV1().Namespaces().Finalize(ctx, updated, metav1.UpdateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return fmt.Errorf("finalize namespace %q: %w", ns.Name, err)
		}
		if ns, err = d.clients.Kube.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("read namespace %q: %w", ns.Name, err)
		}
	}
}

// conditions collects what one pass of the deleter found, as kube's
// namespaceConditionUpdater.
type conditions struct {
	found []corev1.NamespaceCondition
	// contentErrs are the errors deleting content.
	contentErrs []string
	// remainingByResource and remainingByFinalizer count the objects left.
	remainingByResource  map[schema.GroupVersionResource]int
	remainingByFinalizer map[string]int
}

func (c *conditions) discoveryFailed(err error) {
	msg := err.Error()
	var gd *discovery.ErrGroupDiscoveryFailed
	if errors.As(err, &gd) {
		msg = fmt.Sprintf("Discovery failed for some groups, %d failing: %v", len(gd.Groups), err)
	}
	c.found = append(c.found, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionDiscoveryFailure, Status: corev1.ConditionTrue, Reason: "DiscoveryFailed", Message: msg})
}

func (c *conditions) parseFailed(err error) {
	c.found = append(c.found, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionGVParsingFailure, Status: corev1.ConditionTrue, Reason: "GroupVersionParsingFailed", Message: err.Error()})
}

func (c *conditions) contentFailed(err error) { c.contentErrs = append(c.contentErrs, err.Error()) }

// remaining counts the objects of gvr left, given their finalizers.
func (c *conditions) remaining(gvr schema.GroupVersionResource, finalizers [][]string) {
	if len(finalizers) == 0 {
		return
	}
	if c.remainingByResource == nil {
		c.remainingByResource, c.remainingByFinalizer = map[schema.GroupVersionResource]int{}, map[string]int{}
	}
	c.remainingByResource[gvr] += len(finalizers)
	for _, fs := range finalizers {
		for _, f := range fs {
			c.remainingByFinalizer[f]++
		}
	}
}

// conditionTypes are the conditions the deleter keeps, in kube's order,
// with what each says when nothing is wrong.
var conditionTypes = []struct {
	typ             corev1.NamespaceConditionType
	reason, message string
}{
	{corev1.NamespaceDeletionDiscoveryFailure, "ResourcesDiscovered", "All resources successfully discovered"},
	{corev1.NamespaceDeletionGVParsingFailure, "ParsedGroupVersions", "All legacy kube types successfully parsed"},
	{corev1.NamespaceDeletionContentFailure, "ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	{corev1.NamespaceContentRemaining, "ContentRemoved", "All content successfully removed"},
	{corev1.NamespaceFinalizersRemaining, "ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// apply sets every condition type in status from what was found and
// reports whether anything changed.
func (c *conditions) apply(status *corev1.NamespaceStatus, now metav1.Time) bool {
	found := append([]corev1.NamespaceCondition(nil), c.found...)
	if len(c.contentErrs) != 0 {
		msgs := slices.Clone(c.contentErrs)
		sort.Strings(msgs)
		found = append(found, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue, Reason: "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", len(msgs), strings.Join(msgs, ", "))})
	}
	if len(c.remainingByResource) != 0 {
		var parts []string
		for gvr, n := range c.remainingByResource {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		sort.Strings(parts)
		found = append(found, corev1.NamespaceCondition{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue, Reason: "SomeResourcesRemain",
			Message: fmt.Sprintf("Some resources are remaining: %s", strings.Join(parts, ", "))})
	}
	if len(c.remainingByFinalizer) != 0 {
		var parts []string
		for f, n := range c.remainingByFinalizer {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		sort.Strings(parts)
		if len(parts) != 0 {
			found = append(found, corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue, Reason: "SomeFinalizersRemain",
				Message: fmt.Sprintf("Some content in the namespace has finalizers remaining: %s", strings.Join(parts, ", "))})
		}
	}
	changed := false
	for _, ct := range conditionTypes {
		want := corev1.NamespaceCondition{Type: ct.typ, Status: corev1.ConditionFalse, Reason: ct.reason, Message: ct.message}
		for _, f := range found {
			if f.Type == ct.typ {
				want = f
			}
		}
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == ct.typ })
		if i < 0 {
			want.LastTransitionTime = now
			status.Conditions = append(status.Conditions, want)
			changed = true
			continue
		}
		old := &status.Conditions[i]
		if old.Status == want.Status && old.Reason == want.Reason && old.Message == want.Message {
			continue
		}
		if old.Status != want.Status {
			old.LastTransitionTime = now
		}
		old.Status, old.Reason, old.Message = want.Status, want.Reason, want.Message
		changed = true
	}
	return changed
}
