package garbagecollector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// get reads an object's metadata live: caches lag, decisions do not.
func (r *run) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	ctx, cancel := context.WithTimeout(ctx, r.c.requestTimeout)
	defer cancel()
	m, err := r.c.clients.Metadata.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s %s/%s: %w", gvr.GroupResource(), namespace, name, err)
	}
	return m, nil
}

// delete deletes n, read at resourceVersion rv, provided it is still the
// object of n's UID. As kube's collector does, it first asks that the
// object be as it was read, since the decision rested on its owner
// references then and another worker may have changed them meanwhile
// (orphaning removes them). When something else changed, it deletes on
// the UID alone; when the references changed, it considers the object
// again instead.
func (r *run) delete(ctx context.Context, n *node, policy metav1.DeletionPropagation, rv string) error {
	ctx, cancel := context.WithTimeout(ctx, r.c.requestTimeout)
	defer cancel()
	client := r.c.clients.Metadata.Resource(n.resource).Namespace(n.namespace)
	pre := metav1.Preconditions{UID: &n.uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := client.Delete(ctx, n.name, metav1.DeleteOptions{Preconditions: &pre, PropagationPolicy: &policy})
	if apierrors.IsConflict(err) && rv != "" {
		live, err := r.get(ctx, n.resource, n.namespace, n.name)
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("after a conflict: %w", err)
		case live.UID != n.uid:
			return nil
		case !equality.Semantic.DeepEqual(live.OwnerReferences, n.owners):
			r.c.log.Info("owner references changed since the object was read; considering it again", "object", n.String())
			r.deleteQ.Add(n.uid)
			return nil
		}
		return r.delete(ctx, n, policy, "")
	}
	// Gone already, or replaced by another object of the same name,
	// which is not this one's to delete.
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("delete %s: %w", n, err)
}

// removeOwnerReferences removes the references to owners from n.
func (r *run) removeOwnerReferences(ctx context.Context, n *node, owners []types.UID) error {
	return r.patchMeta(ctx, n, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
		kept := slices.DeleteFunc(slices.Clone(m.OwnerReferences), func(ref metav1.OwnerReference) bool {
			return slices.Contains(owners, ref.UID)
		})
		if len(kept) == len(m.OwnerReferences) {
			return nil, false
		}
		if len(kept) == 0 {
			kept = nil
		}
		return map[string]any{"ownerReferences": kept}, true
	})
}

// unblockOwnerReferences makes every reference of n non-blocking.
func (r *run) unblockOwnerReferences(ctx context.Context, n *node) error {
	return r.patchMeta(ctx, n, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
		refs := slices.Clone(m.OwnerReferences)
		changed := false
		for i := range refs {
			if isBlocking(refs[i]) {
				unblocked := false
				refs[i].BlockOwnerDeletion = &unblocked
				changed = true
			}
		}
		return map[string]any{"ownerReferences": refs}, changed
	})
}

// removeFinalizer removes finalizer from n; removing the last one of an
// object being deleted deletes it.
func (r *run) removeFinalizer(ctx context.Context, n *node, finalizer string) error {
	return r.patchMeta(ctx, n, func(m *metav1.PartialObjectMetadata) (map[string]any, bool) {
		kept := slices.DeleteFunc(slices.Clone(m.Finalizers), func(f string) bool { return f == finalizer })
		if len(kept) == len(m.Finalizers) {
			return nil, false
		}
		if len(kept) == 0 {
			kept = nil
		}
		return map[string]any{"finalizers": kept}, true
	})
}

// patchMeta changes metadata fields of n with a JSON merge patch that
// carries the resourceVersion it was computed from, so a concurrent
// writer's change is never overwritten: on conflict it reads and computes
// again. change returns the fields to set, false when nothing changes.
func (r *run) patchMeta(ctx context.Context, n *node, change func(*metav1.PartialObjectMetadata) (map[string]any, bool)) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := r.get(ctx, n.resource, n.namespace, n.name)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if cur.UID != n.uid {
			return nil
		}
		fields, ok := change(cur)
		if !ok {
			return nil
		}
		fields["resourceVersion"] = cur.ResourceVersion
		body, err := json.Marshal(map[string]any{"metadata": fields})
		if err != nil {
			return fmt.Errorf("encode patch: %w", err)
		}
		ctx, cancel := context.WithTimeout(ctx, r.c.requestTimeout)
		defer cancel()
		_, err = r.c.clients.Metadata.Resource(n.resource).Namespace(n.namespace).Patch(ctx, n.name, types.MergePatchType, body, metav1.PatchOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("patch metadata of %s: %w", n, err)
	}
	return nil
}
