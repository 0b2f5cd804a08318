package admissionregistration

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// MutatingWebhookConfigurationStrategy returns the rules of mutating
// webhook configurations.
func MutatingWebhookConfigurationStrategy() resource.Strategy { return mutatingWebhooksStrategy{} }

// ValidatingWebhookConfigurationStrategy returns the rules of validating
// webhook configurations.
func ValidatingWebhookConfigurationStrategy() resource.Strategy {
	return validatingWebhooksStrategy{}
}

// ValidatingAdmissionPolicyStrategy returns the rules of validating
// admission policies. Status is written through /status, whose updates
// leave the spec as stored; both kinds of update are checked here.
func ValidatingAdmissionPolicyStrategy() resource.Strategy { return policyStrategy{} }

// ValidatingAdmissionPolicyBindingStrategy returns the rules of validating
// admission policy bindings.
func ValidatingAdmissionPolicyBindingStrategy() resource.Strategy { return bindingStrategy{} }

var (
	_ rest.NameValidator = mutatingWebhooksStrategy{}
	_ rest.NameValidator = validatingWebhooksStrategy{}
	_ rest.NameValidator = policyStrategy{}
	_ rest.NameValidator = bindingStrategy{}
)

// dnsSubdomain names every kind here, as kube's.
type dnsSubdomain struct{}

func (dnsSubdomain) ValidateName(name string, prefix bool) []string {
	return genericvalidation.NameIsDNSSubdomain(name, prefix)
}

// wrongType is the error for an object the strategy was not built for,
// a wiring mistake that must not pass as valid.
func wrongType(obj runtime.Object, want string) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("got %T, want %s", obj, want))}
}

type validatingWebhooksStrategy struct{ dnsSubdomain }

func (validatingWebhooksStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if c, ok := obj.(*admissionv1.ValidatingWebhookConfiguration); ok {
		defaultValidatingWebhookConfiguration(c)
	}
}

func (s validatingWebhooksStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (validatingWebhooksStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	c, ok := obj.(*admissionv1.ValidatingWebhookConfiguration)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.ValidatingWebhookConfiguration")
	}
	return validateWebhooks(validatingWebhooks(c.Webhooks), createOptions())
}

func (validatingWebhooksStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c, ok := obj.(*admissionv1.ValidatingWebhookConfiguration)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.ValidatingWebhookConfiguration")
	}
	o, ok := old.(*admissionv1.ValidatingWebhookConfiguration)
	if !ok {
		return wrongType(old, "*admissionregistrationv1.ValidatingWebhookConfiguration")
	}
	hooks := validatingWebhooks(c.Webhooks)
	return validateWebhooks(hooks, updateOptions(hooks, validatingWebhooks(o.Webhooks)))
}

type mutatingWebhooksStrategy struct{ dnsSubdomain }

func (mutatingWebhooksStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if c, ok := obj.(*admissionv1.MutatingWebhookConfiguration); ok {
		defaultMutatingWebhookConfiguration(c)
	}
}

func (s mutatingWebhooksStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (mutatingWebhooksStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	c, ok := obj.(*admissionv1.MutatingWebhookConfiguration)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.MutatingWebhookConfiguration")
	}
	return validateWebhooks(mutatingWebhooks(c.Webhooks), createOptions())
}

func (mutatingWebhooksStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	c, ok := obj.(*admissionv1.MutatingWebhookConfiguration)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.MutatingWebhookConfiguration")
	}
	o, ok := old.(*admissionv1.MutatingWebhookConfiguration)
	if !ok {
		return wrongType(old, "*admissionregistrationv1.MutatingWebhookConfiguration")
	}
	hooks := mutatingWebhooks(c.Webhooks)
	return validateWebhooks(hooks, updateOptions(hooks, mutatingWebhooks(o.Webhooks)))
}

type policyStrategy struct{ dnsSubdomain }

func (policyStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if p, ok := obj.(*admissionv1.ValidatingAdmissionPolicy); ok {
		defaultValidatingAdmissionPolicy(p)
	}
}

func (s policyStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (policyStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	p, ok := obj.(*admissionv1.ValidatingAdmissionPolicy)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.ValidatingAdmissionPolicy")
	}
	return validatePolicy(p, false)
}

// ValidateUpdate checks spec and status: an update through the main
// resource carries the stored status, one through /status the stored
// spec, so each half is either what the client changed or already valid.
func (policyStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	p, ok := obj.(*admissionv1.ValidatingAdmissionPolicy)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.ValidatingAdmissionPolicy")
	}
	o, ok := old.(*admissionv1.ValidatingAdmissionPolicy)
	if !ok {
		return wrongType(old, "*admissionregistrationv1.ValidatingAdmissionPolicy")
	}
	errs := validatePolicy(p, skipPolicyMatchConditions(p, o))
	return append(errs, validatePolicyStatus(&p.Status)...)
}

type bindingStrategy struct{ dnsSubdomain }

func (bindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if b, ok := obj.(*admissionv1.ValidatingAdmissionPolicyBinding); ok {
		defaultValidatingAdmissionPolicyBinding(b)
	}
}

func (s bindingStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (bindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b, ok := obj.(*admissionv1.ValidatingAdmissionPolicyBinding)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.ValidatingAdmissionPolicyBinding")
	}
	return validateBinding(b)
}

func (s bindingStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

// MutatingAdmissionPolicyStrategy returns the rules of mutating admission
// policies. The kind has no status.
func MutatingAdmissionPolicyStrategy() resource.Strategy { return mutatingPolicyStrategy{} }

// MutatingAdmissionPolicyBindingStrategy returns the rules of mutating
// admission policy bindings.
func MutatingAdmissionPolicyBindingStrategy() resource.Strategy { return mutatingBindingStrategy{} }

var (
	_ rest.NameValidator = mutatingPolicyStrategy{}
	_ rest.NameValidator = mutatingBindingStrategy{}
)

type mutatingPolicyStrategy struct{ dnsSubdomain }

func (mutatingPolicyStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if p, ok := obj.(*admissionv1.MutatingAdmissionPolicy); ok {
		defaultMutatingAdmissionPolicy(p)
	}
}

func (s mutatingPolicyStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (mutatingPolicyStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	p, ok := obj.(*admissionv1.MutatingAdmissionPolicy)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.MutatingAdmissionPolicy")
	}
	return validateMutatingPolicy(p, nil)
}

func (mutatingPolicyStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	p, ok := obj.(*admissionv1.MutatingAdmissionPolicy)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.MutatingAdmissionPolicy")
	}
	o, ok := old.(*admissionv1.MutatingAdmissionPolicy)
	if !ok {
		return wrongType(old, "*admissionregistrationv1.MutatingAdmissionPolicy")
	}
	return validateMutatingPolicy(p, o)
}

type mutatingBindingStrategy struct{ dnsSubdomain }

func (mutatingBindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if b, ok := obj.(*admissionv1.MutatingAdmissionPolicyBinding); ok {
		defaultMutatingAdmissionPolicyBinding(b)
	}
}

func (s mutatingBindingStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (mutatingBindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b, ok := obj.(*admissionv1.MutatingAdmissionPolicyBinding)
	if !ok {
		return wrongType(obj, "*admissionregistrationv1.MutatingAdmissionPolicyBinding")
	}
	return validateMutatingBinding(b)
}

func (s mutatingBindingStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}
