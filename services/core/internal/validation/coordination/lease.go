package coordination

import (
	"context"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
)

// kubeStrategies are the coordinated lease strategies kube defines; a
// strategy with a "/" is someone else's and only needs a qualified name.
var kubeStrategies = []string{string(coordinationv1.OldestEmulationVersion)}

type leaseStrategy struct{}

// LeaseStrategy validates Leases' specs.
func LeaseStrategy() resource.Strategy { return leaseStrategy{} }

// AllowCreateOnUpdate lets a PUT create a lease, as kube does: leader
// election clients create and renew with the same call.
func (leaseStrategy) AllowCreateOnUpdate() bool { return true }

func (leaseStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (leaseStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (leaseStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

func (leaseStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return validateSpec(&obj.(*coordinationv1.Lease).Spec, field.NewPath("spec"))
}

func validateSpec(spec *coordinationv1.LeaseSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(path.Child("leaseDurationSeconds"), *spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(path.Child("leaseTransitions"), *spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, validateStrategy(string(*spec.Strategy), path.Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(path.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateStrategy reports errors at <path>.strategy, one level deeper than
// the field itself, because kube does.
func validateStrategy(strategy string, path *field.Path) field.ErrorList {
	path = path.Child("strategy")
	if !strings.Contains(strategy, "/") {
		for _, s := range kubeStrategies {
			if s == strategy {
				return nil
			}
		}
		return field.ErrorList{field.NotSupported(path, strategy, kubeStrategies)}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(strategy) {
		errs = append(errs, field.Invalid(path, strategy, msg))
	}
	return errs
}
