package rest

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NameValidator is implemented by strategies whose names follow other rules
// than DNS-1123 subdomains, the default for every kind.
type NameValidator interface {
	// ValidateName returns what is wrong with name; prefix is true for a
	// generateName, which may end in a dash.
	ValidateName(name string, prefix bool) []string
}

// CreateOnUpdater is implemented by strategies whose objects a PUT may
// create, as kube's AllowCreateOnUpdate; by default a PUT of a missing
// object is 404.
type CreateOnUpdater interface {
	AllowCreateOnUpdate() bool
}

// StatusValidator is implemented by strategies that validate an update
// through /status by rules of its own, as kube's custom resources check
// only their status there; others validate it as any update.
type StatusValidator interface {
	ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList
}

// Kube truncates generateName so the random suffix keeps the name within
// 63 characters.
const (
	generatedSuffixLength  = 5
	maxGeneratedNameLength = 63 - generatedSuffixLength
	// generateNameAttempts is how often a create retries a generated name
	// that is taken, as kube's maxNameGenerationCreateAttempts.
	generateNameAttempts = 8
)

func generateName(base string) string {
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return base + rand.String(generatedSuffixLength)
}

func (h *Handler) nameFunc() genericvalidation.ValidateNameFunc {
	if v, ok := h.r.Strategy.(NameValidator); ok {
		return v.ValidateName
	}
	return genericvalidation.NameIsDNSSubdomain
}

// invalid is the 422 kube returns for field errors of an object of this
// resource.
func (h *Handler) invalid(name string, errs field.ErrorList) error {
	return apierrors.NewInvalid(h.r.GroupVersionKind().GroupKind(), name, errs)
}

// prepareCreate fills the system metadata of a new object and runs the
// strategy on it, as kube's BeforeCreate: the object's namespace must be
// the request's, system fields are the server's, status is dropped when
// it has its own subresource, and validation errors are a 422.
func (h *Handler) prepareCreate(ctx context.Context, obj runtime.Object, namespace string) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := ensureNamespace(m, namespace); err != nil {
		return nil, err
	}
	m.SetCreationTimestamp(metav1.NewTime(h.clock.Now().Truncate(time.Second)))
	m.SetUID(uuid.NewUUID())
	m.SetDeletionTimestamp(nil)
	m.SetDeletionGracePeriodSeconds(nil)
	m.SetSelfLink("")
	m.SetGeneration(0)
	if h.r.Generation {
		m.SetGeneration(1)
	}
	if m.GetGenerateName() != "" && m.GetName() == "" {
		m.SetName(generateName(m.GetGenerateName()))
	}
	if h.r.Subresources.Status {
		if obj, err = h.withStatusOf(obj, nil); err != nil {
			return nil, err
		}
		if m, err = meta.Accessor(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	}
	var errs field.ErrorList
	if h.r.Strategy != nil {
		h.r.Strategy.PrepareForCreate(ctx, obj)
		errs = h.r.Strategy.Validate(ctx, obj)
	}
	if h.scale != nil {
		errs = append(errs, h.scale.errors(obj, "")...)
	}
	// Kube runs the generic metadata checks only when the kind's own
	// passed, so a kind's more specific message wins.
	if len(errs) == 0 {
		errs = genericvalidation.ValidateObjectMetaAccessor(m, h.r.Namespaced, h.nameFunc(), field.NewPath("metadata"))
	}
	if len(errs) != 0 {
		return nil, h.invalid(m.GetName(), errs)
	}
	return obj, nil
}

// prepareUpdate turns obj, a client's new state of old, into what is
// stored, as kube's BeforeUpdate plus the status subresource rules:
// system metadata is kept from old, generation moves only when something
// outside metadata (and status, when it is a subresource) changed, and
// the strategy validates the change.
func (h *Handler) prepareUpdate(ctx context.Context, obj, old runtime.Object, namespace, subresource string) (runtime.Object, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := ensureNamespace(m, namespace); err != nil {
		return nil, err
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if obj, err = h.subresourceFields(obj, old, subresource); err != nil {
		return nil, err
	}
	if m, err = meta.Accessor(obj); err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	m.SetGeneration(om.GetGeneration())
	if m.GetUID() == "" {
		m.SetUID(om.GetUID())
	}
	if ts := om.GetCreationTimestamp(); !ts.IsZero() {
		m.SetCreationTimestamp(ts)
	}
	if om.GetDeletionTimestamp() != nil {
		m.SetDeletionTimestamp(om.GetDeletionTimestamp())
	}
	if om.GetDeletionGracePeriodSeconds() != nil && m.GetDeletionGracePeriodSeconds() == nil {
		m.SetDeletionGracePeriodSeconds(om.GetDeletionGracePeriodSeconds())
	}
	m.SetSelfLink("")
	if h.r.Strategy != nil {
		h.r.Strategy.PrepareForUpdate(ctx, obj, old)
	}
	if h.r.Generation {
		changed, err := h.specChanged(obj, old)
		if err != nil {
			return nil, err
		}
		if changed {
			m.SetGeneration(om.GetGeneration() + 1)
		}
	}
	errs := genericvalidation.ValidateObjectMetaAccessor(m, h.r.Namespaced, h.nameFunc(), field.NewPath("metadata"))
	errs = append(errs, genericvalidation.ValidateObjectMetaAccessorUpdate(m, om, field.NewPath("metadata"))...)
	if h.r.Strategy != nil {
		if sv, ok := h.r.Strategy.(StatusValidator); ok && subresource == "status" {
			errs = append(errs, sv.ValidateStatusUpdate(ctx, obj, old)...)
		} else {
			errs = append(errs, h.r.Strategy.ValidateUpdate(ctx, obj, old)...)
		}
	}
	if h.scale != nil {
		errs = append(errs, h.scale.errors(obj, subresource)...)
	}
	if len(errs) != 0 {
		return nil, h.invalid(m.GetName(), errs)
	}
	return obj, nil
}

// ensureNamespace defaults an object's namespace to the request's and
// refuses another one, as kube's EnsureObjectNamespaceMatchesRequestNamespace.
func ensureNamespace(m metav1.Object, namespace string) error {
	switch {
	case m.GetNamespace() == namespace:
	case m.GetNamespace() == "" || namespace == "":
		m.SetNamespace(namespace)
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	return nil
}

// content returns obj as a JSON-shaped map. An unstructured object's map
// is its own; a typed object's is a conversion.
func content(obj runtime.Object) (map[string]any, error) {
	if u, ok := obj.(runtime.Unstructured); ok {
		return u.UnstructuredContent(), nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert %T to a map: %w", obj, err))
	}
	return m, nil
}

// fromContent returns an object of this resource holding m.
func (h *Handler) fromContent(m map[string]any) (runtime.Object, error) {
	obj := h.r.Objects.New()
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetUnstructuredContent(m)
		return u, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, obj); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("convert a map to %T: %w", obj, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(h.r.GroupVersionKind())
	return obj, nil
}

// statusPath and finalizersPath are the fields /status and /finalize
// change; metadataPath what /status changes besides status when the
// resource's status strategy lets it.
var (
	statusPath     = []string{"status"}
	finalizersPath = []string{"spec", "finalizers"}
	metadataPath   = []string{"metadata"}
)

// withStatusOf returns obj with src's status, or without status when src
// is nil or has none.
func (h *Handler) withStatusOf(obj, src runtime.Object) (runtime.Object, error) {
	return h.withFieldOf(obj, src, statusPath)
}

// withFieldOf returns obj with src's field at path, or without it when
// src is nil or has none.
func (h *Handler) withFieldOf(obj, src runtime.Object, path []string) (runtime.Object, error) {
	m, err := content(obj.DeepCopyObject())
	if err != nil {
		return nil, err
	}
	unstructured.RemoveNestedField(m, path...)
	if src != nil {
		sm, err := content(src)
		if err != nil {
			return nil, err
		}
		if v, ok, _ := unstructured.NestedFieldNoCopy(sm, path...); ok {
			if err := unstructured.SetNestedField(m, v, path...); err != nil {
				return nil, apierrors.NewInternalError(fmt.Errorf("set %v: %w", path, err))
			}
		}
	}
	return h.fromContent(m)
}

// fieldOnly returns old with obj's field at path and obj's managedFields:
// what an update through a subresource that owns that field may change,
// as kube's status and finalize strategies.
func (h *Handler) fieldOnly(obj, old runtime.Object, path []string) (runtime.Object, error) {
	out, err := h.withFieldOf(old, obj, path)
	if err != nil {
		return nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	om, err := meta.Accessor(out)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	om.SetManagedFields(m.GetManagedFields())
	om.SetResourceVersion(m.GetResourceVersion())
	om.SetUID(m.GetUID())
	return out, nil
}

// subresourceFields applies the subresource rules to obj, the new state
// of old written through subresource: /status and /finalize change only
// their field, the main resource keeps both.
func (h *Handler) subresourceFields(obj, old runtime.Object, subresource string) (runtime.Object, error) {
	var err error
	if h.r.Subresources.Status {
		if subresource == "status" {
			changed := obj
			obj, err = h.fieldOnly(changed, old, statusPath)
			if err == nil && h.r.Subresources.StatusWithMetadata {
				obj, err = h.withFieldOf(obj, changed, metadataPath)
			}
		} else {
			obj, err = h.withFieldOf(obj, old, statusPath)
		}
		if err != nil {
			return nil, err
		}
	}
	if h.r.Subresources.Finalize {
		if subresource == "finalize" {
			obj, err = h.fieldOnly(obj, old, finalizersPath)
		} else {
			obj, err = h.withFieldOf(obj, old, finalizersPath)
		}
	}
	return obj, err
}

// specChanged reports whether obj differs from old outside metadata, and
// outside status when status is a subresource: the changes that move
// generation.
func (h *Handler) specChanged(obj, old runtime.Object) (bool, error) {
	a, err := content(obj)
	if err != nil {
		return false, err
	}
	b, err := content(old)
	if err != nil {
		return false, err
	}
	for k := range b {
		if _, ok := a[k]; !ok && !h.ignoredForGeneration(k) {
			return true, nil
		}
	}
	for k := range a {
		if !h.ignoredForGeneration(k) && !equality.Semantic.DeepEqual(a[k], b[k]) {
			return true, nil
		}
	}
	return false, nil
}

func (h *Handler) ignoredForGeneration(k string) bool {
	switch k {
	case "metadata", "apiVersion", "kind":
		return true
	case "status":
		return h.r.Subresources.Status
	}
	return false
}

// keepManagedFieldsTimestamps restores old's managedFields when obj
// differs from old in nothing but managedFields timestamps, so that a
// no-op update stores the same bytes and keeps its resourceVersion, as
// kube's IgnoreManagedFieldsTimestampsTransformer. old is the write's
// private copy of the stored object.
func keepManagedFieldsTimestamps(obj, old runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	om, err := meta.Accessor(old)
	if err != nil {
		return
	}
	got, had := m.GetManagedFields(), om.GetManagedFields()
	if len(got) != len(had) || len(got) == 0 {
		return
	}
	for i := range got {
		a, b := got[i], had[i]
		a.Time, b.Time = nil, nil
		if !equality.Semantic.DeepEqual(a, b) {
			return
		}
	}
	// obj is compared in place, with old's managedFields and
	// resourceVersion, rather than in a copy made for every update.
	restore := takeManagedFields(obj, old, m, had)
	ownVersion := m.GetResourceVersion()
	m.SetResourceVersion(om.GetResourceVersion())
	same := equality.Semantic.DeepEqual(obj, old)
	m.SetResourceVersion(ownVersion)
	if !same {
		restore()
	}
}

// takeManagedFields gives obj old's managedFields and returns what puts
// obj's own back. Unstructured objects swap their JSON form, which
// SetManagedFields would convert each time.
func takeManagedFields(obj, old runtime.Object, m metav1.Object, had []metav1.ManagedFieldsEntry) func() {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		if ou, ok := old.(*unstructured.Unstructured); ok {
			md, mdOK := u.Object["metadata"].(map[string]any)
			omd, omdOK := ou.Object["metadata"].(map[string]any)
			if mdOK && omdOK {
				own := md["managedFields"]
				md["managedFields"] = omd["managedFields"]
				return func() { md["managedFields"] = own }
			}
		}
	}
	own := m.GetManagedFields()
	m.SetManagedFields(had)
	return func() { m.SetManagedFields(own) }
}
