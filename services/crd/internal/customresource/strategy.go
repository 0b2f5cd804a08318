package customresource

import (
	"context"
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// Strategy is kube's custom resource strategy for one version: writes
// are pruned and defaulted whatever way they came (a patch as well as a
// body), then validated by the schema, the embedded resources' metadata,
// the list types and the CEL rules. The REST layer keeps status out of
// the main resource, generation and the generic metadata rules.
type Strategy struct {
	v *version
}

var (
	_ resource.Strategy    = (*Strategy)(nil)
	_ rest.StatusValidator = (*Strategy)(nil)
)

// PrepareForCreate prunes and defaults a new object.
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	s.normalize(obj)
}

// PrepareForUpdate prunes and defaults the new state of an object.
func (s *Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	s.normalize(obj)
}

func (s *Strategy) normalize(obj runtime.Object) {
	u := obj.(*unstructured.Unstructured)
	// Errors of coercion are those of embedded metadata, which Validate
	// reports with their path.
	_, _ = s.v.coerce(u, false)
	s.v.applyDefaults(u)
}

// Validate checks a new object.
func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	u := obj.(*unstructured.Unstructured)
	if errs := s.typeMeta(u); len(errs) > 0 {
		return errs
	}
	errs := apiservervalidation.ValidateCustomResource(nil, u.UnstructuredContent(), s.v.validator)
	if s.v.structural == nil {
		return errs
	}
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.v.structural, false)...)
	errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.v.structural, u.Object)...)
	return append(errs, s.celErrors(ctx, errs, u.Object, nil)...)
}

// ValidateUpdate checks a change, with kube's ratcheting: a value left as
// it was is not refused for failing a rule it failed before.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, ou := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if errs := s.typeMeta(u); len(errs) > 0 {
		return errs
	}
	var opts []apiservervalidation.ValidationOption
	var celOpts []cel.Option
	if s.v.structural != nil {
		correlated := common.NewCorrelatedObject(u.Object, ou.Object, &model.Structural{Structural: s.v.structural})
		opts = append(opts, apiservervalidation.WithRatcheting(correlated))
		celOpts = append(celOpts, cel.WithRatcheting(correlated))
	}
	errs := apiservervalidation.ValidateCustomResourceUpdate(nil, u.UnstructuredContent(), ou.UnstructuredContent(), s.v.validator, opts...)
	if s.v.structural == nil {
		return errs
	}
	errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u.Object, s.v.structural, false)...)
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.v.structural, ou.Object); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.v.structural, u.Object)...)
	}
	return append(errs, s.celErrors(ctx, errs, u.Object, ou.Object, celOpts...)...)
}

// ValidateStatusUpdate checks an update through /status as kube does:
// the status by its own schema, list types and CEL rules, with
// ratcheting; the rest of the object is the stored one's.
func (s *Strategy) ValidateStatusUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	u, ou := obj.(*unstructured.Unstructured), old.(*unstructured.Unstructured)
	if errs := s.typeMeta(u); len(errs) > 0 {
		return errs
	}
	var opts []apiservervalidation.ValidationOption
	var celOpts []cel.Option
	if s.v.structural != nil {
		correlated := common.NewCorrelatedObject(u.Object, ou.Object, &model.Structural{Structural: s.v.structural})
		opts = append(opts, apiservervalidation.WithRatcheting(correlated.Key("status")))
		celOpts = append(celOpts, cel.WithRatcheting(correlated))
	}
	var errs field.ErrorList
	if status, ok := u.Object["status"]; ok && s.v.statusValidator != nil {
		errs = apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), status, ou.Object["status"], s.v.statusValidator, opts...)
	}
	if s.v.structural == nil {
		return errs
	}
	if oldErrs := structurallisttype.ValidateListSetsAndMaps(nil, s.v.structural, ou.Object); len(oldErrs) == 0 {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, s.v.structural, u.Object)...)
	}
	return append(errs, s.celErrors(ctx, errs, u.Object, ou.Object, celOpts...)...)
}

// celErrors runs the CEL rules unless errs has an error that makes the
// object's shape unreliable, as kube does.
func (s *Strategy) celErrors(ctx context.Context, errs field.ErrorList, obj, old any, opts ...cel.Option) field.ErrorList {
	if s.v.cel == nil {
		return nil
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	out, _ := s.v.cel.Validate(ctx, nil, s.v.structural, obj, old, celconfig.RuntimeCELCostBudget, opts...)
	return out
}

// typeMeta refuses an object of another kind or version.
func (s *Strategy) typeMeta(u *unstructured.Unstructured) field.ErrorList {
	var errs field.ErrorList
	if u.GetKind() != s.v.gvk.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), u.GetKind(), fmt.Sprintf("must be %v", s.v.gvk.Kind)))
	}
	if want := s.v.gvk.GroupVersion().String(); u.GetAPIVersion() != want {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), u.GetAPIVersion(), fmt.Sprintf("must be %v", want)))
	}
	return errs
}
