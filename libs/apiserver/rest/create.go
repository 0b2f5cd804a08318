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
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/storage"
)

func (h *Handler) create(c echo.Context, info *requestinfo.Info) error {
	opts := &metav1.CreateOptions{}
	if err := decodeOptions(c, opts, "CreateOptions", func() field.ErrorList { return metavalidation.ValidateCreateOptions(opts) }); err != nil {
		return err
	}
	obj, _, err := h.decodeObject(c, info, opts.FieldValidation)
	if err != nil {
		return err
	}
	out, err := h.createObject(c.Request().Context(), obj, write{
		namespace: info.Namespace,
		manager:   patch.ManagerName(opts.FieldManager, c.Request().UserAgent()),
		dryRun:    isDryRun(opts.DryRun),
		options:   opts,
	})
	if err != nil {
		return err
	}
	return h.writeObject(c, http.StatusCreated, out)
}

// write is what a create, update or patch request asks for besides its
// object.
type write struct {
	namespace, name, subresource string
	// manager owns the fields the write sets in managedFields.
	manager string
	dryRun  bool
	// allowCreate lets an update of a missing object create it: a PUT
	// when the strategy allows it, and every apply.
	allowCreate bool
	// uid, when set, must be the stored object's (a PUT naming a uid).
	uid string
	// patched says the new state comes from the patcher, which has
	// recorded managedFields already.
	patched bool
	// options are the request's options, for admission.
	options runtime.Object
}

// createObject stores obj as a new object, as kube's generic registry
// Create: system metadata, a generated name (retried when taken),
// strategy defaults and validation, then managedFields.
func (h *Handler) createObject(ctx context.Context, obj runtime.Object, w write) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if m.GetResourceVersion() != "" {
		// Kube's storage refuses this with an internal error, which is
		// what clients have always seen.
		return nil, apierrors.NewInternalError(errors.New("resourceVersion should not be set on objects to be created"))
	}
	generated := m.GetGenerateName() != "" && m.GetName() == ""
	gr := h.r.GroupResource()
	opts := createOptions(w.options)
	if err := ensureNamespace(m, w.namespace); err != nil {
		return nil, err
	}
	if obj, err = h.admit(ctx, h.attributes(ctx, Create, w.namespace, m.GetName(), "", obj, nil, opts, w.dryRun)); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		o := obj
		if generated {
			// A generated name that is taken starts over from obj.
			o = obj.DeepCopyObject()
		}
		o, err := h.prepareCreate(ctx, o, w.namespace)
		if err != nil {
			return nil, err
		}
		if o, err = h.manage(h.r.Objects.New(), o, w); err != nil {
			return nil, err
		}
		om, err := meta.Accessor(o)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := h.validate(ctx, h.attributes(ctx, Create, w.namespace, om.GetName(), "", o, nil, opts, w.dryRun)); err != nil {
			return nil, err
		}
		if w.dryRun {
			return o, nil
		}
		key := h.keys.Object(om.GetNamespace(), om.GetName())
		out, err := h.store.Create(ctx, key, o)
		if err == nil {
			return out, nil
		}
		err = apistatus.FromStorage(err, gr, om.GetName())
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		if generated {
			if attempt < generateNameAttempts {
				continue
			}
			return nil, apierrors.NewGenerateNameConflict(gr, om.GetName(), 1)
		}
		return nil, h.whileDeleting(ctx, key, err)
	}
}

// whileDeleting says so when an AlreadyExists comes from an object whose
// deletion waits for finalizers, as kube does.
func (h *Handler) whileDeleting(ctx context.Context, key string, err error) error {
	existing, gerr := h.store.Get(ctx, key, storage.GetOptions{})
	if gerr != nil {
		return err
	}
	m, merr := meta.Accessor(existing)
	var se *apierrors.StatusError
	if merr != nil || m.GetDeletionTimestamp() == nil || !errors.As(err, &se) {
		return err
	}
	se.ErrStatus.Message = fmt.Sprintf("object is being deleted: %s", se.ErrStatus.Message)
	return se
}

// manage records the write in obj's managedFields against live.
func (h *Handler) manage(live, obj runtime.Object, w write) (runtime.Object, error) {
	if w.patched {
		return obj, nil
	}
	return h.patcher.Update(live, obj, w.manager, w.subresource)
}

// createOptions returns the CreateOptions admission sees for a create
// that came as opts: an update or an apply patch creating its object is
// a create, as kube's updateToCreateOptions.
func createOptions(opts runtime.Object) runtime.Object {
	var out *metav1.CreateOptions
	switch o := opts.(type) {
	case *metav1.CreateOptions:
		out = o.DeepCopy()
	case *metav1.UpdateOptions:
		out = &metav1.CreateOptions{DryRun: o.DryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation}
	case *metav1.PatchOptions:
		out = &metav1.CreateOptions{DryRun: o.DryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation}
	default:
		return opts
	}
	out.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("CreateOptions"))
	return out
}

// updateOptions returns the UpdateOptions admission sees for an update
// that came as opts: a patch is an update, as kube's patchToUpdateOptions.
func updateOptions(opts runtime.Object) runtime.Object {
	var out *metav1.UpdateOptions
	switch o := opts.(type) {
	case *metav1.UpdateOptions:
		out = o.DeepCopy()
	case *metav1.PatchOptions:
		out = &metav1.UpdateOptions{DryRun: o.DryRun, FieldManager: o.FieldManager, FieldValidation: o.FieldValidation}
	default:
		return opts
	}
	out.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("UpdateOptions"))
	return out
}
