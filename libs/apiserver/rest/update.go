package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/storage"
)

func (h *Handler) update(c echo.Context, info *requestinfo.Info) error {
	opts := &metav1.UpdateOptions{}
	if err := decodeOptions(c, opts, "UpdateOptions", func() field.ErrorList { return metavalidation.ValidateUpdateOptions(opts) }); err != nil {
		return err
	}
	obj, m, err := h.decodeObject(c, info, opts.FieldValidation)
	if err != nil {
		return err
	}
	if m.GetName() != info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), info.Name))
	}
	cu, ok := h.r.Strategy.(CreateOnUpdater)
	w := write{
		namespace:   info.Namespace,
		name:        info.Name,
		subresource: info.Subresource,
		manager:     patch.ManagerName(opts.FieldManager, c.Request().UserAgent()),
		dryRun:      isDryRun(opts.DryRun),
		allowCreate: ok && cu.AllowCreateOnUpdate(),
		uid:         string(m.GetUID()),
		options:     opts,
	}
	same := func(context.Context, runtime.Object) (runtime.Object, error) { return obj.DeepCopyObject(), nil }
	out, created, err := h.updateObject(c.Request().Context(), w, same, same)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return h.writeObject(c, code, out)
}

// newStateFunc computes what a write makes of the stored object; existing
// is nil when the object does not exist and the write may create it.
type newStateFunc func(ctx context.Context, existing runtime.Object) (runtime.Object, error)

// errEmptiedFinalizers stops an update that removes the last finalizer of
// an object being deleted: the object is deleted instead.
var errEmptiedFinalizers = errors.New("emptied finalizers")

// updateObject writes newState(existing) over the stored object inside
// storage's guaranteed update, so a concurrent writer makes it start
// over rather than lose either write. It reports whether it created the
// object instead (when w.allowCreate and the object is missing).
func (h *Handler) updateObject(ctx context.Context, w write, newState, createState newStateFunc) (runtime.Object, bool, error) {
	key := h.keys.Object(w.namespace, w.name)
	var pre *storage.Preconditions
	if w.uid != "" {
		uid := types.UID(w.uid)
		pre = &storage.Preconditions{UID: &uid}
	}
	for {
		var deleting runtime.Object
		var deletingRV string
		try := func(existing runtime.Object) (runtime.Object, error) {
			obj, err := h.updated(ctx, w, newState, existing)
			if errors.Is(err, errEmptiedFinalizers) {
				deleting = obj
				deletingRV = resourceVersionOf(existing)
			}
			return obj, err
		}
		var out runtime.Object
		var err error
		if w.dryRun {
			out, err = h.dryRunUpdate(ctx, key, pre, try)
		} else {
			out, err = h.store.GuaranteedUpdate(ctx, key, pre, try)
		}
		switch {
		case err == nil:
			return out, false, nil
		case errors.Is(err, errEmptiedFinalizers):
			if w.dryRun {
				return deleting, false, nil
			}
			out, err := h.deleteEmptied(ctx, key, w.name, deletingRV, deleting)
			if storage.IsInvalidObj(err) {
				// The object changed between the update and the delete:
				// decide again from what it is now.
				continue
			}
			return out, false, err
		case storage.IsNotFound(err) && w.allowCreate:
			out, err := h.createOnUpdate(ctx, w, createState)
			if apierrors.IsAlreadyExists(err) {
				// Created by someone else meanwhile: update it instead.
				continue
			}
			return out, err == nil, err
		}
		return nil, false, apistatus.FromStorage(err, h.r.GroupResource(), w.name)
	}
}

// updated is one attempt of an update against existing, as kube's
// registry Update: the write's new state, the optimistic concurrency check
// of the resourceVersion it carries, managedFields, and BeforeUpdate.
func (h *Handler) updated(ctx context.Context, w write, newState newStateFunc, existing runtime.Object) (runtime.Object, error) {
	obj, err := newState(ctx, existing)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	switch rv := m.GetResourceVersion(); rv {
	case "":
		// An update without resourceVersion overwrites whatever is there.
		m.SetResourceVersion(resourceVersionOf(existing))
	case resourceVersionOf(existing):
	default:
		return nil, apierrors.NewConflict(h.r.GroupResource(), w.name, errors.New(apistatus.OptimisticLockErrorMsg))
	}
	if obj, err = h.manage(existing, obj, w); err != nil {
		return nil, err
	}
	opts := updateOptions(w.options)
	if w.subresource != scaleSubresource {
		// A write through /scale ran mutating admission on its Scale
		// while computing its new state, as kube.
		if obj, err = h.admit(ctx, h.attributes(ctx, Update, w.namespace, w.name, w.subresource, obj, existing, opts, w.dryRun)); err != nil {
			return nil, err
		}
	}
	if obj, err = h.prepareUpdate(ctx, obj, existing, w.namespace, w.subresource); err != nil {
		return nil, err
	}
	keepManagedFieldsTimestamps(obj, existing)
	a := h.attributes(ctx, Update, w.namespace, w.name, w.subresource, obj, existing, opts, w.dryRun)
	if w.subresource == scaleSubresource && len(h.admission) != 0 {
		if a, err = h.scaleAttributes(a); err != nil {
			return nil, err
		}
	}
	if err := h.validate(ctx, a); err != nil {
		return nil, err
	}
	if h.emptiesFinalizers(obj, existing) {
		return obj, errEmptiedFinalizers
	}
	return obj, nil
}

// dryRunUpdate computes what GuaranteedUpdate would store without
// storing it.
func (h *Handler) dryRunUpdate(ctx context.Context, key string, pre *storage.Preconditions, try storage.UpdateFunc) (runtime.Object, error) {
	existing, err := h.store.Get(ctx, key, storage.GetOptions{})
	if err != nil {
		return nil, err
	}
	if pre != nil && pre.UID != nil {
		m, err := meta.Accessor(existing)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if m.GetUID() != *pre.UID {
			return nil, storage.NewError(storage.ErrCodeInvalidObj, key, 0,
				fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", *pre.UID, m.GetUID()))
		}
	}
	return try(existing.DeepCopyObject())
}

// createOnUpdate creates the object an update found missing.
func (h *Handler) createOnUpdate(ctx context.Context, w write, createState newStateFunc) (runtime.Object, error) {
	if err := h.authorizeCreate(ctx, w); err != nil {
		return nil, err
	}
	obj, err := createState(ctx, nil)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if m.GetName() == "" {
		m.SetName(w.name)
	}
	if m.GetName() != w.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", m.GetName(), w.name))
	}
	if err := ensureNamespace(m, w.namespace); err != nil {
		return nil, err
	}
	// The resourceVersion a client sent was for an object that is gone;
	// kube's create-on-update ignores it too.
	m.SetResourceVersion("")
	return h.createObject(ctx, obj, w)
}

// emptiesFinalizers reports whether obj, the new state of an object being
// deleted, has no finalizers left, its kind's own included, so the object
// goes, as kube's ShouldDeleteDuringUpdate.
func (h *Handler) emptiesFinalizers(obj, existing runtime.Object) bool {
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetFinalizers()) != 0 || h.finalizing(obj) {
		return false
	}
	om, err := meta.Accessor(existing)
	if err != nil || om.GetDeletionTimestamp() == nil {
		return false
	}
	g := om.GetDeletionGracePeriodSeconds()
	return g == nil || *g == 0
}

// deleteEmptied deletes an object whose last finalizer an update removed,
// provided it is still at rv, and answers the update with obj, as kube.
func (h *Handler) deleteEmptied(ctx context.Context, key, name, rv string, obj runtime.Object) (runtime.Object, error) {
	_, err := h.store.Delete(ctx, key, &storage.Preconditions{ResourceVersion: &rv}, nil)
	switch {
	case err == nil, storage.IsNotFound(err):
		// Racing updates may each remove the last finalizer; one deletes.
		return obj, nil
	case storage.IsInvalidObj(err):
		return nil, err
	}
	return nil, apistatus.FromStorage(err, h.r.GroupResource(), name)
}

func resourceVersionOf(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}
