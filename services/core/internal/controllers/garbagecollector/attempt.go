package garbagecollector

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// attemptToDeleteItem decides the fate of one object from its live state,
// as kube's attemptToDeleteItem: finish its foreground deletion, or
// delete it when no owner is left, or strip references to owners that are
// gone or waiting for it.
func (r *run) attemptToDeleteItem(ctx context.Context, uid types.UID) error {
	n := r.graph.node(uid)
	if n == nil {
		return nil
	}
	latest, err := r.get(ctx, n.resource, n.namespace, n.name)
	switch {
	case apierrors.IsNotFound(err):
		// Gone: its informer will tell the graph.
		return nil
	case err != nil:
		return err
	case latest.UID != uid:
		return nil
	}
	cur := newNode(n.resource, n.kind, latest)
	if cur.deletingDependents {
		return r.processDeletingDependents(ctx, cur)
	}
	// Being deleted is a one-way trip: its dependents are considered
	// once it is gone.
	if cur.beingDeleted || len(cur.owners) == 0 {
		return nil
	}
	solid, dangling, waiting, err := r.classify(ctx, cur)
	if err != nil {
		return err
	}
	switch {
	case len(solid) != 0:
		if len(dangling) == 0 && len(waiting) == 0 {
			return nil
		}
		// References to owners waiting for their dependents go too, or
		// those owners would wait for this object forever.
		gone := append(uids(dangling), uids(waiting)...)
		r.c.log.Info("removing references to owners that are gone or deleting their dependents", "object", cur.String(), "owners", gone)
		return r.removeOwnerReferences(ctx, cur, gone)
	case len(waiting) != 0 && len(r.graph.dependentsOf(cur.uid)) != 0:
		for _, dep := range r.graph.dependentsOf(cur.uid) {
			if dep.deletingDependents {
				// A dependent waiting for its own dependents may be
				// waiting for this object's owner: unblock to break the
				// possible cycle, as kube does.
				if err := r.unblockOwnerReferences(ctx, cur); err != nil {
					return err
				}
				break
			}
		}
		r.c.log.Info("deleting in the foreground, an owner waits for its dependents", "object", cur.String())
		return r.delete(ctx, cur, metav1.DeletePropagationForeground, latest.ResourceVersion)
	default:
		policy := metav1.DeletePropagationBackground
		switch {
		case slices.Contains(latest.Finalizers, metav1.FinalizerOrphanDependents):
			policy = metav1.DeletePropagationOrphan
		case slices.Contains(latest.Finalizers, metav1.FinalizerDeleteDependents):
			policy = metav1.DeletePropagationForeground
		}
		r.c.log.Info("deleting an object whose owners are all gone", "object", cur.String(), "propagationPolicy", string(policy))
		return r.delete(ctx, cur, policy, latest.ResourceVersion)
	}
}

// processDeletingDependents removes the foregroundDeletion finalizer from
// owner when no dependent blocks it, else asks to delete the blockers.
func (r *run) processDeletingDependents(ctx context.Context, owner *node) error {
	var blocking []*node
	for _, dep := range r.graph.dependentsOf(owner.uid) {
		if dep.blocks(owner.uid) {
			blocking = append(blocking, dep)
		}
	}
	if len(blocking) == 0 {
		r.c.log.Info("removing the foregroundDeletion finalizer, no dependent blocks it", "object", owner.String())
		return r.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
	}
	for _, dep := range blocking {
		if !dep.deletingDependents {
			r.deleteQ.Add(dep.uid)
		}
	}
	return nil
}

// attemptToOrphanItem removes an owner being deleted with the orphan
// finalizer from its dependents' references, then removes the finalizer.
func (r *run) attemptToOrphanItem(ctx context.Context, uid types.UID) error {
	n := r.graph.node(uid)
	if n == nil {
		return nil
	}
	latest, err := r.get(ctx, n.resource, n.namespace, n.name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case latest.UID != uid:
		return nil
	}
	owner := newNode(n.resource, n.kind, latest)
	if !owner.orphaning {
		return nil
	}
	for _, dep := range r.graph.dependentsOf(uid) {
		if err := r.removeOwnerReferences(ctx, dep, []types.UID{uid}); err != nil {
			return fmt.Errorf("orphan %s: %w", dep, err)
		}
	}
	r.c.log.Info("orphaned dependents; removing the orphan finalizer", "object", owner.String())
	return r.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents)
}

// classify sorts dependent's references by their owners' live state, as
// kube: solid owners exist and do not wait for their dependents; dangling
// ones are gone (a same-name object with another UID counts as gone, and
// a namespaced owner is looked for in the dependent's namespace only);
// waiting ones are being deleted in the foreground.
func (r *run) classify(ctx context.Context, dependent *node) (solid, dangling, waiting []metav1.OwnerReference, err error) {
	for _, ref := range dependent.owners {
		gvr, namespaced, err := r.resourceOf(ref)
		if err != nil {
			return nil, nil, nil, err
		}
		if namespaced && dependent.namespace == "" {
			// Kube cannot resolve such a reference and leaves the
			// object alone rather than retry forever.
			return nil, nil, nil, fmt.Errorf("%s is cluster-scoped and refers to a namespaced owner %s %s: %w", dependent, ref.Kind, ref.Name, errUnresolvable)
		}
		namespace := ""
		if namespaced {
			namespace = dependent.namespace
		}
		owner, err := r.get(ctx, gvr, namespace, ref.Name)
		switch {
		case apierrors.IsNotFound(err):
			dangling = append(dangling, ref)
		case err != nil:
			return nil, nil, nil, err
		case owner.UID != ref.UID:
			dangling = append(dangling, ref)
		case newNode(gvr, ref.Kind, owner).deletingDependents:
			waiting = append(waiting, ref)
		default:
			solid = append(solid, ref)
		}
	}
	return solid, dangling, waiting, nil
}

// resourceOf maps a reference's kind to its resource and scope. A version
// no longer served still names the same object under another one.
func (r *run) resourceOf(ref metav1.OwnerReference) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("parse owner apiVersion %q: %w", ref.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mapping, err := r.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		mapping, err = r.mapper.RESTMapping(gk)
	}
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("find the resource of owner kind %s: %w", gk, err)
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func uids(refs []metav1.OwnerReference) []types.UID {
	out := make([]types.UID, len(refs))
	for i, ref := range refs {
		out[i] = ref.UID
	}
	return out
}

// String names n in logs and errors.
func (n *node) String() string {
	if n.namespace == "" {
		return fmt.Sprintf("%s %s (uid %s)", n.resource.GroupResource(), n.name, n.uid)
	}
	return fmt.Sprintf("%s %s/%s (uid %s)", n.resource.GroupResource(), n.namespace, n.name, n.uid)
}
