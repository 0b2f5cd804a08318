package rest

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
)

// scaleSubresource is the name of /scale, which requests, admission and
// managedFields entries carry.
const scaleSubresource = "scale"

// scaleGVK is the kind /scale serves, for every resource, as kube.
var scaleGVK = autoscalingv1.SchemeGroupVersion.WithKind("Scale")

// unsetReplicas stands for a spec replicas field the object lacks in the
// Scale a write starts from, so that a write leaving it so is refused
// rather than storing a count nobody asked for; kube uses the same value.
const unsetReplicas = math.MinInt32

// scaleKind holds what every /scale shares, the Scale codec and schema,
// built once since they are the same for every resource.
var scaleKind = sync.OnceValues(func() (*scaleDecl, error) {
	scheme := runtime.NewScheme()
	if err := autoscalingv1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register autoscaling/v1: %w", err)
	}
	objs, err := objects.NewTyped(scheme, scaleGVK, "")
	if err != nil {
		return nil, fmt.Errorf("build the Scale codec: %w", err)
	}
	s, err := builtin.Schema(scaleGVK)
	if err != nil {
		return nil, fmt.Errorf("load the Scale schema: %w", err)
	}
	return &scaleDecl{objects: objs, schema: s}, nil
})

type scaleDecl struct {
	objects resource.Objects
	schema  *resource.Schema
}

// scaler serves /scale of one resource.
type scaler struct {
	decl *resource.Scale
	// h decodes and answers Scales in the resource's scope.
	h *Handler
	// patcher patches Scales and keeps their managedFields.
	patcher *patch.Patcher
	// spec, status and selector are the declared paths split into field
	// names; selector is nil when undeclared.
	spec, status, selector []string
	// mappings tell kube's ScaleHandler where the resource keeps the
	// replicas, to move their managedFields between it and the Scale.
	mappings managedfields.ResourcePathMappings
}

// newScaler returns the /scale of parent's resource, nil when it has none.
func newScaler(parent *Handler) (*scaler, error) {
	r := parent.r
	decl := r.Subresources.Scale
	if decl == nil {
		return nil, nil
	}
	if _, ok := r.Objects.New().(*unstructured.Unstructured); !ok {
		return nil, fmt.Errorf("resource %s: /scale is served for unstructured objects only", r.GroupResource())
	}
	spec, err := scalePath(decl.SpecReplicasPath, "spec")
	if err != nil {
		return nil, fmt.Errorf("resource %s: specReplicasPath: %w", r.GroupResource(), err)
	}
	status, err := scalePath(decl.StatusReplicasPath, "status")
	if err != nil {
		return nil, fmt.Errorf("resource %s: statusReplicasPath: %w", r.GroupResource(), err)
	}
	var selector []string
	if decl.LabelSelectorPath != "" {
		if selector, err = scalePath(decl.LabelSelectorPath, "spec", "status"); err != nil {
			return nil, fmt.Errorf("resource %s: labelSelectorPath: %w", r.GroupResource(), err)
		}
	}
	kind, err := scaleKind()
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.GroupResource(), err)
	}
	columns, err := scaleColumns(parent.clock)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.GroupResource(), err)
	}
	sr := &resource.Resource{
		GroupVersionResource: scaleGVK.GroupVersion().WithResource(r.GroupVersionResource.Resource),
		Kind:                 scaleGVK.Kind,
		Namespaced:           r.Namespaced,
		Verbs:                []string{"get", "patch", "update"},
		Objects:              kind.objects,
		Schema:               kind.schema,
		Columns:              columns,
	}
	p, err := patch.NewSubresource(sr, scaleSubresource)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", r.GroupResource(), err)
	}
	replicas := make(fieldpath.Path, 0, len(spec))
	for _, name := range spec {
		replicas = append(replicas, fieldpath.PathElement{FieldName: &name})
	}
	return &scaler{
		decl:     decl,
		h:        &Handler{r: sr, clock: parent.clock, log: parent.log, watchTimeout: parent.watchTimeout, offers: offerOf(sr)},
		patcher:  p,
		spec:     spec,
		status:   status,
		selector: selector,
		mappings: managedfields.ResourcePathMappings{r.GroupVersionResource.GroupVersion().String(): replicas},
	}, nil
}

// scaleColumns are the table columns of a Scale, as kube prints a custom
// resource's: its replica counts and age.
func scaleColumns(c clock.PassiveClock) ([]resource.Column, error) {
	desired, err := resource.NewJSONPathCell(".spec.replicas", "integer", c)
	if err != nil {
		return nil, fmt.Errorf("build the Desired column: %w", err)
	}
	available, err := resource.NewJSONPathCell(".status.replicas", "integer", c)
	if err != nil {
		return nil, fmt.Errorf("build the Available column: %w", err)
	}
	return []resource.Column{
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Desired", Type: "integer", Description: "Number of desired replicas"}, Cell: desired},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Available", Type: "integer", Description: "Number of actual replicas"}, Cell: available},
		{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: objectMetaDocs["creationTimestamp"]}, Cell: resource.AgeCell{Clock: c}},
	}, nil
}

// scalePath splits a declared path, which a CustomResourceDefinition
// requires to be a simple JSON path under one of roots.
func scalePath(path string, roots ...string) ([]string, error) {
	names := strings.Split(strings.TrimPrefix(path, "."), ".")
	if !strings.HasPrefix(path, ".") || len(names) < 2 || !slices.Contains(roots, names[0]) {
		return nil, fmt.Errorf("%q is not a JSON path under .%s", path, strings.Join(roots, " or ."))
	}
	for _, n := range names {
		if n == "" || strings.ContainsAny(n, "[]*'\"\\") {
			return nil, fmt.Errorf("%q is not a path of field names", path)
		}
	}
	return names, nil
}

// of returns the Scale of obj, as kube's scaleFromCustomResource, and
// whether obj has the spec replicas field. A field of the wrong type is
// the bare 500 kube answers.
func (s *scaler) of(obj runtime.Object) (*autoscalingv1.Scale, bool, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, false, apierrors.NewInternalError(fmt.Errorf("read the scale of %T: not unstructured", obj))
	}
	spec, found, err := unstructured.NestedInt64(u.Object, s.spec...)
	if err != nil {
		return nil, false, unknownError(err)
	}
	status, _, err := unstructured.NestedInt64(u.Object, s.status...)
	if err != nil {
		return nil, false, unknownError(err)
	}
	var selector string
	if s.selector != nil {
		if selector, _, err = unstructured.NestedString(u.Object, s.selector...); err != nil {
			return nil, false, unknownError(err)
		}
	}
	return &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{APIVersion: scaleGVK.GroupVersion().String(), Kind: scaleGVK.Kind},
		ObjectMeta: metav1.ObjectMeta{
			Name:              u.GetName(),
			Namespace:         u.GetNamespace(),
			UID:               u.GetUID(),
			ResourceVersion:   u.GetResourceVersion(),
			CreationTimestamp: u.GetCreationTimestamp(),
		},
		Spec:   autoscalingv1.ScaleSpec{Replicas: int32(spec)},
		Status: autoscalingv1.ScaleStatus{Replicas: int32(status), Selector: selector},
	}, found, nil
}

// unknownError is how kube answers an error that is no API status: a
// 500 with the error's message and no reason.
func unknownError(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: err.Error(),
	}}
}

// errors checks the fields the Scale is read from, as kube's validation
// of a custom resource with a scale: the replica counts must be int32s
// that are not negative, the selector a string. The spec replicas are
// checked unless the write is through /status, which cannot change them.
func (s *scaler) errors(obj runtime.Object, subresource string) field.ErrorList {
	m, err := content(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var errs field.ErrorList
	if subresource != "status" {
		errs = append(errs, replicasErrors(m, s.decl.SpecReplicasPath, s.spec)...)
	}
	errs = append(errs, replicasErrors(m, s.decl.StatusReplicasPath, s.status)...)
	if s.selector != nil {
		if v, _, err := unstructured.NestedString(m, s.selector...); err != nil {
			errs = append(errs, field.Invalid(field.NewPath(s.decl.LabelSelectorPath), v, err.Error()))
		}
	}
	return errs
}

func replicasErrors(m map[string]any, path string, names []string) field.ErrorList {
	v, _, err := unstructured.NestedInt64(m, names...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, err.Error())}
	case v < 0:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, "should be a non-negative integer")}
	case v > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(path), v, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// serveScale answers a request for /scale, whose verb the resource
// allows.
func (h *Handler) serveScale(c echo.Context, info *requestinfo.Info) error {
	if err := h.scale.h.acceptable(c, info.Verb); err != nil {
		return err
	}
	switch info.Verb {
	case "get":
		return h.getScale(c, info)
	case "update":
		return h.updateScale(c, info)
	case "patch":
		return h.patchScale(c, info)
	}
	return apierrors.NewMethodNotSupported(h.r.GroupResource(), info.Verb)
}

func (h *Handler) getScale(c echo.Context, info *requestinfo.Info) error {
	out, err := negotiate(c.Request(), false, h.offers)
	if err != nil {
		return err
	}
	var opts metav1.GetOptions
	if err := metainternalversionscheme.ParameterCodec.DecodeParameters(c.QueryParams(), metav1.SchemeGroupVersion, &opts); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	obj, err := h.store.Get(c.Request().Context(), h.keys.Object(info.Namespace, info.Name), storage.GetOptions{ResourceVersion: opts.ResourceVersion})
	if err != nil {
		return apistatus.FromStorage(err, h.r.GroupResource(), info.Name)
	}
	s, found, err := h.scale.of(obj)
	if err != nil {
		return err
	}
	if !found {
		return apierrors.NewInternalError(fmt.Errorf("the spec replicas field %q does not exist", h.scale.decl.SpecReplicasPath))
	}
	return h.scale.h.respond(c, http.StatusOK, s, out)
}

func (h *Handler) updateScale(c echo.Context, info *requestinfo.Info) error {
	opts := &metav1.UpdateOptions{}
	if err := decodeOptions(c, opts, "UpdateOptions", func() field.ErrorList { return metavalidation.ValidateUpdateOptions(opts) }); err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	obj, err := h.scale.h.decodeBody(c, body, fieldValidation(opts.FieldValidation), newWarnings(c))
	if err != nil {
		return err
	}
	want, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return apierrors.NewInternalError(fmt.Errorf("decode a Scale: got %T", obj))
	}
	if err := ensureNamespace(want, info.Namespace); err != nil {
		return err
	}
	if want.Name != info.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", want.Name, info.Name))
	}
	w := write{
		namespace:   info.Namespace,
		name:        info.Name,
		subresource: scaleSubresource,
		manager:     patch.ManagerName(opts.FieldManager, c.Request().UserAgent()),
		dryRun:      isDryRun(opts.DryRun),
		uid:         string(want.UID),
		patched:     true,
		options:     opts,
	}
	replace := func(_ context.Context, old *autoscalingv1.Scale) (runtime.Object, error) {
		return h.scale.patcher.Update(old, want.DeepCopy(), w.manager, scaleSubresource)
	}
	return h.writeScale(c, w, replace)
}

func (h *Handler) patchScale(c echo.Context, info *requestinfo.Info) error {
	pr, err := h.readPatch(c, info, scaleSubresource)
	if err != nil {
		return err
	}
	body, opts, popts, warn := pr.body, pr.opts, pr.popts, pr.warn
	w := write{
		namespace:   info.Namespace,
		name:        info.Name,
		subresource: scaleSubresource,
		manager:     patch.ManagerName(opts.FieldManager, c.Request().UserAgent()),
		dryRun:      isDryRun(opts.DryRun),
		patched:     true,
		options:     opts,
	}
	patched := func(ctx context.Context, old *autoscalingv1.Scale) (runtime.Object, error) {
		obj, err := h.scale.patcher.Patch(ctx, old, body, popts)
		if strictErr, ok := runtime.AsStrictDecodingError(err); ok && obj != nil {
			// Patch reports unknown and duplicate fields this way only
			// under Warn.
			for _, e := range strictErr.Errors() {
				for _, m := range yamlWarnings(e.Error()) {
					warn.add(m)
				}
			}
			return obj, nil
		}
		return obj, err
	}
	return h.writeScale(c, w, patched)
}

// scaleChange computes the Scale a write makes of old, the Scale of the
// stored object with the managedFields it owns there.
type scaleChange func(ctx context.Context, old *autoscalingv1.Scale) (runtime.Object, error)

// writeScale stores the object with the spec replicas of the Scale that
// change makes, through the update path every write takes, and answers
// with the Scale of what was stored. Nothing but the spec replicas
// changes, as kube's scale of a custom resource.
func (h *Handler) writeScale(c echo.Context, w write, change scaleChange) error {
	newState := func(ctx context.Context, existing runtime.Object) (runtime.Object, error) {
		return h.scaled(ctx, w, existing, change)
	}
	out, _, err := h.updateObject(c.Request().Context(), w, newState, nil)
	if err != nil {
		return err
	}
	s, _, err := h.scale.of(out)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return h.scale.h.writeObject(c, http.StatusOK, s)
}

// scaled is the new state of existing that a write through /scale makes,
// as kube's scaleUpdatedObjectInfo: the Scale of existing changed by
// change and by mutating admission, its spec replicas and resourceVersion
// set on existing, and the managedFields entries that own the replicas
// moved between the two.
func (h *Handler) scaled(ctx context.Context, w write, existing runtime.Object, change scaleChange) (runtime.Object, error) {
	old, found, err := h.scale.of(existing)
	if err != nil {
		return nil, err
	}
	if !found {
		old.Spec.Replicas = unsetReplicas
	}
	m, err := meta.Accessor(existing)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	fields := managedfields.NewScaleHandler(m.GetManagedFields(), h.r.GroupVersionResource.GroupVersion(), h.scale.mappings)
	if old.ManagedFields, err = fields.ToSubresource(); err != nil {
		return nil, unknownError(fmt.Errorf("convert managedFields to the scale's: %w", err))
	}
	obj, err := change(ctx, old)
	if err != nil {
		return nil, err
	}
	a := h.attributes(ctx, Update, w.namespace, w.name, w.subresource, obj, old, updateOptions(w.options), w.dryRun)
	a.setKind(scaleGVK)
	if obj, err = h.admit(ctx, a); err != nil {
		return nil, err
	}
	s, ok := obj.(*autoscalingv1.Scale)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("wrong object passed to Scale update: %v", obj))
	}
	if s.Spec.Replicas == unsetReplicas {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the spec replicas field %q cannot be empty", h.scale.decl.SpecReplicasPath))
	}
	u := existing.DeepCopyObject().(*unstructured.Unstructured)
	if err := unstructured.SetNestedField(u.Object, int64(s.Spec.Replicas), h.scale.spec...); err != nil {
		return nil, unknownError(err)
	}
	if s.ResourceVersion != "" {
		// The Scale's resourceVersion is the precondition of the write.
		u.SetResourceVersion(s.ResourceVersion)
	}
	entries, err := fields.ToParent(s.ManagedFields)
	if err != nil {
		return nil, unknownError(fmt.Errorf("convert the scale's managedFields back: %w", err))
	}
	u.SetManagedFields(entries)
	return u, nil
}

// scaleAttributes turns a's objects, states of the resource's object,
// into their Scales, which validating admission of /scale sees, as kube.
func (h *Handler) scaleAttributes(a *Attributes) (*Attributes, error) {
	obj, _, err := h.scale.of(a.Object)
	if err != nil {
		return nil, err
	}
	old, _, err := h.scale.of(a.OldObject)
	if err != nil {
		return nil, err
	}
	out := *a
	out.Kind, out.Object, out.OldObject = scaleGVK, obj, old
	return &out, nil
}
