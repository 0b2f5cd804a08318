package rest

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
)

// DeferredDeleter is implemented by strategies of kinds whose deletion
// waits on finalizers of the kind's own besides metadata.finalizers, as
// a namespace waits on spec.finalizers. Deleting such an object that
// still waits on either keeps it: the first DELETE sets its
// deletionTimestamp and lets the strategy mark it (a namespace turns
// Terminating), later ones return it unchanged. The object goes when an
// update leaves neither kind of finalizer.
type DeferredDeleter interface {
	// PrepareForDelete changes obj as its deletion starts.
	PrepareForDelete(obj runtime.Object)
	// Finalizing reports whether obj waits on finalizers of its kind's own.
	Finalizing(obj runtime.Object) bool
}

// finalizing reports whether obj waits on its kind's own finalizers.
func (h *Handler) finalizing(obj runtime.Object) bool {
	dd, ok := h.r.Strategy.(DeferredDeleter)
	return ok && dd.Finalizing(obj)
}

// deferDelete applies a DeferredDeleter's rules to the delete of
// existing. kept reports that the object stays, out being its state;
// otherwise the delete proceeds as any other kind's.
func (h *Handler) deferDelete(ctx context.Context, dd DeferredDeleter, key string, pre *storage.Preconditions, opts *metav1.DeleteOptions, existing runtime.Object, dryRun bool) (out runtime.Object, kept bool, err error) {
	m, err := meta.Accessor(existing)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	if m.GetDeletionTimestamp() != nil {
		// Deletion started already: the object waits for its kind's
		// finalizers, or else goes as soon as metadata.finalizers allow.
		return existing, dd.Finalizing(existing), nil
	}
	if pre.UID == nil {
		// The delete is of the object read, not of one recreated under
		// the same name meanwhile, as kube's namespace registry.
		uid := m.GetUID()
		pre.UID = &uid
	}
	start := func(obj runtime.Object) (runtime.Object, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if changes, finalizers := gcFinalizers(m, opts); changes {
			m.SetFinalizers(finalizers)
		}
		if len(m.GetFinalizers()) == 0 && !dd.Finalizing(obj) {
			return nil, errDeleteNow
		}
		if m.GetDeletionTimestamp() == nil {
			now := metav1.NewTime(h.clock.Now().Truncate(time.Second))
			m.SetDeletionTimestamp(&now)
		}
		dd.PrepareForDelete(obj)
		return obj, nil
	}
	if dryRun {
		out, err = start(existing.DeepCopyObject())
	} else {
		out, err = h.store.GuaranteedUpdate(ctx, key, pre, start)
	}
	if errors.Is(err, errDeleteNow) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}

// admitDelete runs admission on the delete of existing.
func (h *Handler) admitDelete(ctx context.Context, namespace, name string, existing runtime.Object, opts *metav1.DeleteOptions, dryRun bool) error {
	if len(h.admission) == 0 {
		return nil
	}
	o := opts.DeepCopy()
	o.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("DeleteOptions"))
	a := h.attributes(ctx, Delete, namespace, name, "", nil, existing, o, dryRun)
	if _, err := h.admit(ctx, a); err != nil {
		return err
	}
	return h.validate(ctx, a)
}
