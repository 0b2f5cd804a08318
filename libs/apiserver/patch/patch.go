package patch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"kplane.dev/libs/apiserver/resource"
)

// maxJSONPatchOperations is kube-apiserver's limit on the operations of one
// JSON patch.
const maxJSONPatchOperations = 10000

// maxPatchedBytes bounds what a patch may make: kube-apiserver's
// JSONPatchMaxCopyBytes (how much the copy operations of one JSON patch
// may add, each doubling what it copies) and its MaxRequestBodyBytes (an
// object larger than a request may carry is no object it would store).
const maxPatchedBytes = 3 << 20

// limitCopies sets json-patch v4's bound on what copy operations add. The
// library offers it only as a package variable, as kube-apiserver sets it;
// every Patcher of the process wants the same value, so it is set once.
var limitCopies = sync.OnceFunc(func() { jsonpatch.AccumulatedCopySizeLimit = maxPatchedBytes })

// Patcher applies patches to one resource's objects and keeps their
// managedFields. It is safe for concurrent use.
type Patcher struct {
	gvk     schema.GroupVersionKind
	gr      schema.GroupResource
	objects resource.Objects
	// namespaced resources take the request's namespace; others drop any.
	namespaced bool
	// typed is true for k8s.io/api structs, which alone accept strategic
	// merge patches.
	typed    bool
	managers map[string]*managedfields.FieldManager
	accepted []string
}

// New returns the Patcher of a resource. Its managed fields follow the
// resource's Schema, or treat every field as atomic when Schema is nil.
func New(r *resource.Resource) (*Patcher, error) {
	return build(r, resets(r))
}

// NewSubresource returns the Patcher of a subresource that has a kind of
// its own, as /scale has autoscaling/v1 Scale: r declares that kind, and
// the managedFields entries it records name subresource, which patches
// must give as Options.Subresource.
func NewSubresource(r *resource.Resource, subresource string) (*Patcher, error) {
	return build(r, map[string]map[fieldpath.APIVersion]fieldpath.Filter{subresource: nil})
}

func build(r *resource.Resource, subresources map[string]map[fieldpath.APIVersion]fieldpath.Filter) (*Patcher, error) {
	limitCopies()
	_, isUnstructured := r.Objects.New().(runtime.Unstructured)
	k := kindObjects{objects: r.Objects, gvk: r.GroupVersionKind(), typed: !isUnstructured}
	k.versions, _ = r.Objects.(resource.VersionConverter)
	tc, err := newTypeConverter(r)
	if err != nil {
		return nil, fmt.Errorf("build patcher of %s: %w", r.GroupResource(), err)
	}
	// Without a schema for the kind every managedFields update would fail
	// and be dropped silently; refuse the declaration instead.
	if _, err := tc.ObjectToTyped(r.Objects.New()); err != nil {
		return nil, fmt.Errorf("build patcher of %s: schema %v does not describe %s: %w", r.GroupResource(), schemaRef(r.Schema), k.gvk, err)
	}
	managers, err := newFieldManagers(r, tc, k, subresources)
	if err != nil {
		return nil, fmt.Errorf("build patcher of %s: %w", r.GroupResource(), err)
	}
	accepted := []string{string(types.JSONPatchType), string(types.MergePatchType)}
	if k.typed {
		accepted = append(accepted, string(types.StrategicMergePatchType))
	}
	accepted = append(accepted, string(types.ApplyYAMLPatchType))
	return &Patcher{
		gvk:        k.gvk,
		gr:         r.GroupResource(),
		objects:    r.Objects,
		namespaced: r.Namespaced,
		typed:      k.typed,
		managers:   managers,
		accepted:   accepted,
	}, nil
}

func schemaRef(s *resource.Schema) string {
	if s == nil {
		return "(none)"
	}
	return s.Ref
}

// PatchTypes returns the patch content types the resource accepts, in the
// order kube-apiserver lists them.
func (p *Patcher) PatchTypes() []string { return append([]string(nil), p.accepted...) }

// Options are a patch request's parameters.
type Options struct {
	// Name and Namespace address the object on the URL; the patched object
	// must keep them (a patched object without a namespace takes the
	// request's).
	Name, Namespace string
	// FieldManager is the fieldManager parameter, required for apply.
	FieldManager string
	// UserAgent names the manager of a non-apply patch without
	// FieldManager, as kube-apiserver does.
	UserAgent string
	// Force is the force parameter: apply takes ownership of conflicting
	// fields. Only apply accepts it.
	Force bool
	// Subresource is "" or the subresource the patch is sent to ("status").
	Subresource string
	// FieldValidation is the fieldValidation parameter: Strict, Warn
	// (kube's default, also for ""), or Ignore.
	FieldValidation string
}

// Patch returns current patched by body. current is a private copy that
// Patch may change; it is nil when the object does not exist, which only an
// apply patch may create (other types get NotFound).
//
// Every error is an API status error with kube-apiserver's code, reason and
// message, except one: a strict decoding error (runtime.IsStrictDecodingError)
// comes with the patched object when FieldValidation is Warn, and lists the
// unknown and duplicate fields to return as warnings.
func (p *Patcher) Patch(ctx context.Context, current runtime.Object, body *Body, opts Options) (runtime.Object, error) {
	patchType := body.Type
	if !p.accepts(patchType) {
		return nil, p.unsupportedMediaType()
	}
	if err := validateOptions(patchType, opts); err != nil {
		return nil, err
	}
	fm, err := p.fieldManager(opts.Subresource)
	if err != nil {
		// The resource does not serve the subresource: nothing is there.
		return nil, apierrors.NewNotFound(p.gr, opts.Name)
	}
	exists, err := hasUID(current)
	if err != nil {
		return nil, err
	}
	if exists {
		p.setKind(current)
	}
	directive := opts.FieldValidation
	if directive == "" {
		directive = metav1.FieldValidationWarn
	}

	var patched runtime.Object
	var warnings []error
	switch {
	case patchType == types.ApplyYAMLPatchType:
		live := current
		if !exists {
			live = p.objects.New()
		}
		patched, warnings, err = p.apply(live, body, fm, opts, directive)
	case !exists:
		return nil, apierrors.NewNotFound(p.gr, opts.Name)
	case patchType == types.StrategicMergePatchType:
		patched, warnings, err = p.strategicMerge(current, body.Raw, directive)
	default:
		patched, warnings, err = p.jsonPatch(current, patchType, body.Raw, directive)
	}
	if err != nil {
		return nil, err
	}
	if patchType != types.ApplyYAMLPatchType {
		patched = fm.UpdateNoErrors(current, patched, ManagerName(opts.FieldManager, opts.UserAgent))
	}
	if err := p.checkIdentity(patched, exists, opts); err != nil {
		return nil, err
	}
	if len(warnings) > 0 {
		return patched, runtime.NewStrictDecodingError(warnings)
	}
	return patched, nil
}

func (p *Patcher) accepts(patchType types.PatchType) bool {
	for _, t := range p.accepted {
		if t == string(patchType) {
			return true
		}
	}
	return false
}

// unsupportedMediaType is kube-apiserver's 415 for a patch type the
// resource does not accept.
func (p *Patcher) unsupportedMediaType() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + strings.Join(p.accepted, ", "),
	}}
}

// validateOptions checks the parameters as kube-apiserver's patch handler
// does, before reading the body.
func validateOptions(patchType types.PatchType, opts Options) error {
	po := &metav1.PatchOptions{FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation}
	if opts.Force {
		po.Force = &opts.Force
	}
	if errs := metavalidation.ValidatePatchOptions(po, patchType); len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "PatchOptions"}, "", errs)
	}
	return nil
}

// encode writes current as JSON in its own version. The resource's codec
// writes what is stored, which for a custom resource served in another
// version than its storage version is another version.
func (p *Patcher) encode(current runtime.Object) ([]byte, error) {
	if u, ok := current.(runtime.Unstructured); ok {
		return json.Marshal(u.UnstructuredContent())
	}
	return p.objects.Encode(current)
}

// jsonPatch applies a JSON patch or a JSON merge patch to the object's JSON.
func (p *Patcher) jsonPatch(current runtime.Object, patchType types.PatchType, body []byte, directive string) (runtime.Object, []error, error) {
	currentJSON, err := p.encode(current)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("encode %s to patch it: %w", p.gvk.Kind, err))
	}
	strict := directive == metav1.FieldValidationStrict || directive == metav1.FieldValidationWarn
	var strictErrs []error
	var patchedJSON []byte
	if patchType == types.JSONPatchType {
		if strict {
			var ops []jsonPatchOp
			if strictErrs, err = kjson.UnmarshalStrict(body, &ops); err != nil {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
			for i, e := range strictErrs {
				strictErrs[i] = fmt.Errorf("json patch %v", e)
			}
		}
		ops, err := jsonpatch.DecodePatch(body)
		if err != nil {
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		if len(ops) > maxJSONPatchOperations {
			return nil, nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOperations, len(ops)))
		}
		if err := checkRootOps(ops); err != nil {
			return nil, nil, err
		}
		if patchedJSON, err = ops.Apply(currentJSON); err != nil {
			return nil, nil, unprocessable(err.Error())
		}
		if len(patchedJSON) > maxPatchedBytes {
			return nil, nil, tooLarge()
		}
	} else {
		if strict {
			if strictErrs, err = kjson.UnmarshalStrict(body, &map[string]any{}); err != nil {
				return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
			}
		}
		if patchedJSON, err = jsonpatch.MergePatch(currentJSON, body); err != nil {
			// kube-apiserver answers 400 only for ErrBadJSONPatch and 500
			// otherwise; every merge failure here comes from the body.
			return nil, nil, apierrors.NewBadRequest(err.Error())
		}
		if len(patchedJSON) > maxPatchedBytes {
			return nil, nil, tooLarge()
		}
	}

	obj, err := p.objects.DecodeRequest(patchedJSON, resource.DecodeOptions{Strict: strict})
	var decodeStrictErrs []error
	if se, ok := runtime.AsStrictDecodingError(err); ok {
		decodeStrictErrs, err = se.Errors(), nil
	}
	if err == nil && obj.GetObjectKind().GroupVersionKind() != p.gvk {
		err = fmt.Errorf("unable to decode %s into %v", obj.GetObjectKind().GroupVersionKind(), reflect.TypeOf(p.objects.New()))
	}
	if err != nil {
		return nil, nil, invalidPatch(string(patchedJSON), err.Error())
	}
	return p.strictResult(obj, append(strictErrs, decodeStrictErrs...), directive, string(patchedJSON))
}

// checkRootOps refuses a replace or test of the whole document that has no
// value, which json-patch v4.13.0 dereferences as nil and panics on. The
// answer is the 422 that an unusable root value or a failed test gets.
func checkRootOps(ops jsonpatch.Patch) error {
	for _, op := range ops {
		kind := op.Kind()
		if kind != "replace" && kind != "test" {
			continue
		}
		if path, err := op.Path(); err != nil || path != "" {
			continue
		}
		if _, ok := op["value"]; !ok {
			return unprocessable(fmt.Sprintf("%s operation on the whole document has no value", kind))
		}
	}
	return nil
}

// jsonPatchOp is one JSON patch operation, decoded strictly to report its
// unknown and duplicate fields.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// strictResult returns obj and the unknown or duplicate fields found in
// the patch: an Invalid error naming them under Strict, warnings under Warn.
func (p *Patcher) strictResult(obj runtime.Object, strictErrs []error, directive, patchValue string) (runtime.Object, []error, error) {
	if len(strictErrs) == 0 || directive == metav1.FieldValidationIgnore {
		return obj, nil, nil
	}
	if directive == metav1.FieldValidationWarn {
		return obj, strictErrs, nil
	}
	return nil, nil, invalidPatch(patchValue, runtime.NewStrictDecodingError(strictErrs).Error())
}

// strategicMerge applies a strategic merge patch, driven by the Go struct's
// patch tags.
func (p *Patcher) strategicMerge(current runtime.Object, body []byte, directive string) (runtime.Object, []error, error) {
	currentMap, err := runtime.DefaultUnstructuredConverter.ToUnstructured(current)
	if err != nil {
		return nil, nil, apierrors.NewInternalError(fmt.Errorf("convert %s to patch it: %w", p.gvk.Kind, err))
	}
	strict := directive == metav1.FieldValidationStrict || directive == metav1.FieldValidationWarn
	patchMap := map[string]any{}
	var strictErrs []error
	if strict {
		strictErrs, err = kjson.UnmarshalStrict(body, &patchMap)
	} else {
		err = kjson.UnmarshalCaseSensitivePreserveInts(body, &patchMap)
	}
	if err != nil {
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	patchedMap, err := strategicpatch.StrategicMergeMapPatch(currentMap, patchMap, p.objects.New())
	if err != nil {
		return nil, nil, strategicMergeError(err)
	}
	obj := p.objects.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(patchedMap, obj, strict); err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, nil, invalidPatch(fmt.Sprintf("%+v", patchMap), err.Error())
		}
		strictErrs = append(strictErrs, se.Errors()...)
	}
	// The struct's kind is not data: a patch to apiVersion or kind does not
	// change what the object is, as with kube-apiserver.
	obj.GetObjectKind().SetGroupVersionKind(p.gvk)
	return p.strictResult(obj, strictErrs, directive, fmt.Sprintf("%+v", patchMap))
}

// strategicMergeError gives strategic merge failures kube-apiserver's codes.
func strategicMergeError(err error) error {
	switch err {
	case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
		return unprocessable(err.Error())
	default:
		// kube-apiserver answers 500 for the failures it does not list
		// (such as a map where a list belongs); they all come from the body.
		return apierrors.NewBadRequest(err.Error())
	}
}

// apply merges an apply configuration into live, taking ownership of the
// fields it sets for opts.FieldManager.
func (p *Patcher) apply(live runtime.Object, body *Body, fm *managedfields.FieldManager, opts Options, directive string) (runtime.Object, []error, error) {
	patchObj := &unstructured.Unstructured{Object: map[string]any{}}
	if err := body.applyConfig(&patchObj.Object); err != nil {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error decoding patch: %v", err))
	}
	obj, err := fm.Apply(live, patchObj, opts.FieldManager, opts.Force)
	if err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, nil, err
		}
		// kube-apiserver answers 500 when the configuration does not fit
		// the schema (kubernetes/kubernetes#139253); it is the client's
		// error, so say 400 with the same message.
		return nil, nil, apierrors.NewBadRequest(err.Error())
	}
	if directive == metav1.FieldValidationIgnore || body.duplicates == nil {
		return obj, nil, nil
	}
	if directive == metav1.FieldValidationStrict {
		return nil, nil, apierrors.NewBadRequest(fmt.Sprintf("error strict decoding patch: %v", body.duplicates))
	}
	return obj, []error{body.duplicates}, nil
}

// checkIdentity keeps a patch from changing which object it is: a created
// object may not bring a uid, and the namespace and name must be the
// request's.
func (p *Patcher) checkIdentity(obj runtime.Object, existed bool, opts Options) error {
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("read metadata of patched %s: %w", p.gvk.Kind, err))
	}
	if !existed && accessor.GetUID() != "" {
		return apierrors.NewConflict(p.gr, opts.Name, fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", accessor.GetUID()))
	}
	requestNamespace := opts.Namespace
	if !p.namespaced {
		requestNamespace = ""
	}
	switch ns := accessor.GetNamespace(); {
	case ns == requestNamespace:
	case ns == "" || requestNamespace == "":
		accessor.SetNamespace(requestNamespace)
	default:
		return apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if accessor.GetName() != opts.Name {
		return apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", accessor.GetName(), opts.Name))
	}
	return nil
}

func hasUID(obj runtime.Object) (bool, error) {
	if obj == nil {
		return false, nil
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("read metadata of current object: %w", err))
	}
	return accessor.GetUID() != "", nil
}

// invalidPatch is kube-apiserver's 422 for a patch whose result is not an
// object of the kind.
func invalidPatch(value, detail string) error {
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), value, detail)})
}

// tooLarge is kube-apiserver's 413 for a body over its limit, for an
// object that a patch would make larger than any request may carry.
func tooLarge() error {
	return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxPatchedBytes))
}

func unprocessable(message string) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", message, 0, false)
}

// ManagerName returns the field manager of a write: its fieldManager
// parameter, or else the user agent up to its first "/", printable
// characters only, at most 128 bytes, as kube-apiserver names it.
func ManagerName(fieldManager, userAgent string) string {
	if fieldManager != "" {
		return fieldManager
	}
	prefix, _, _ := strings.Cut(userAgent, "/")
	var b bytes.Buffer
	for _, r := range prefix {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > metavalidation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}
