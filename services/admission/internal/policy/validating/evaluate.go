package validating

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	kubevalidating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"kplane.dev/services/admission/internal/review"
)

const (
	// validationFailureAnnotation is kube's audit annotation listing the
	// failed validations of bindings with the Audit action.
	validationFailureAnnotation = "validation.policy.admission.k8s.io/validation_failure"
	// maxValidationFailures bounds that annotation, as kube does.
	maxValidationFailures = 50
	// maxAuditAnnotationValueLength is where kube cuts a policy's audit
	// annotation value.
	maxAuditAnnotationValueLength = 10 * 1024
)

// evaluation is one write's pass over the policies, gathering what
// kube's dispatcher gathers: the refusals, the audit failures, the
// warnings and the audit annotations.
type evaluation struct {
	v  *Validator
	a  *review.Attributes
	va *admission.VersionedAttributes

	namespaces namespaceCache
	denied     []denial
	failures   []kubevalidating.ValidationFailureValue
	warnings   []string
	annotation map[string]string
}

// denial is a refusal with the policy and binding (nil for the policy's
// own configuration errors) that made it.
type denial struct {
	kubevalidating.PolicyDecision
	policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// configError applies the policy's failurePolicy to a configuration
// error, with kube's messages.
func (e *evaluation) configError(err error, p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	policy := admissionregistrationv1.Fail
	if p.Spec.FailurePolicy != nil {
		policy = *p.Spec.FailurePolicy
	}
	var message string
	switch policy {
	case admissionregistrationv1.Ignore:
		e.v.cfg.Logger.Warn("validating admission policy misconfigured, ignoring it", "policy", p.Name, "binding", bindingName(b), "err", err)
		return
	case admissionregistrationv1.Fail:
		if b == nil {
			message = fmt.Errorf("failed to configure policy: %w", err).Error()
		} else {
			message = fmt.Errorf("failed to configure binding: %w", err).Error()
		}
	default:
		message = fmt.Errorf("unrecognized failure policy: '%v'", policy).Error()
	}
	e.denied = append(e.denied, denial{PolicyDecision: kubevalidating.PolicyDecision{Action: kubevalidating.ActionDeny, Message: message}, policy: p, binding: b})
}

func bindingName(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string {
	if b == nil {
		return ""
	}
	return b.Name
}

// policy evaluates h's bindings that match. The error is one that ends
// the whole evaluation, as kube's dispatcher returns it.
func (e *evaluation) policy(ctx context.Context, h hook) error {
	p := h.policy
	matches, target, err := e.matchPolicy(ctx, p)
	if err != nil {
		e.configError(err, p, nil)
		return nil
	}
	if !matches {
		return nil
	}
	var kind *paramKind
	if p.Spec.ParamKind != nil {
		gv, err := schema.ParseGroupVersion(p.Spec.ParamKind.APIVersion)
		if err != nil {
			// Kube's policy source leaves such a policy out.
			e.v.cfg.Logger.WarnContext(ctx, "validating admission policy has an invalid paramKind, skipping it", "policy", p.Name, "err", err)
			return nil
		}
		kind, err = e.paramKind(ctx, gv.WithKind(p.Spec.ParamKind.Kind))
		if err != nil {
			e.configError(err, p, nil)
			return nil
		}
	}
	validator := e.v.compiled.validator(p)
	annotations := auditAnnotations{}
	for _, b := range h.bindings {
		matches, err := e.matchBinding(ctx, b)
		if err != nil {
			e.configError(err, p, b)
			continue
		}
		if !matches {
			continue
		}
		params, err := e.params(ctx, p.Spec.ParamKind, kind, b.Spec.ParamRef)
		if err != nil {
			e.configError(err, p, b)
			continue
		}
		if len(params) == 0 {
			continue
		}
		var namespace *corev1.Namespace
		if name := e.a.Request.Namespace; name != "" && !isNamespace(e.a) {
			namespace, err = e.namespaces.get(ctx, e.v.cfg.Namespaces, name)
			if err != nil {
				return err
			}
		}
		va, err := e.versioned(target)
		if err != nil {
			return err
		}
		for _, param := range params {
			result := validator.Validate(ctx, target.Resource, va, param, namespace, celconfig.RuntimeCELCostBudget, e.v.cfg.Authorizer)
			if err := e.decisions(ctx, p, b, result, annotations); err != nil {
				return err
			}
		}
	}
	for k, v := range annotations.values(p.Name) {
		e.annotate(k, v)
	}
	return nil
}

// versioned is the write as policies that matched it as t see it: the
// write itself, or its conversion to an equivalent kind.
func (e *evaluation) versioned(t review.Target) (*admission.VersionedAttributes, error) {
	if t == e.a.Own() {
		return e.va, nil
	}
	seen, err := e.a.As(t)
	if err != nil {
		return nil, err
	}
	va, err := seen.Versioned()
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("prepare the request for validating admission policies: %w", err))
	}
	return va, nil
}

// isNamespace says whether a writes a namespace, which kube gives no
// namespaceObject.
func isNamespace(a *review.Attributes) bool {
	k := a.Request.Kind
	return k.Group == "" && k.Version == "v1" && k.Kind == "Namespace"
}

// decisions records one evaluation of a binding as kube's dispatcher
// does.
func (e *evaluation) decisions(ctx context.Context, p *admissionregistrationv1.ValidatingAdmissionPolicy, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, result kubevalidating.ValidateResult, annotations auditAnnotations) error {
	for i, d := range result.Decisions {
		errType := string(kubevalidating.ErrorType(&d))
		switch d.Action {
		case kubevalidating.ActionAdmit:
			if d.Evaluation == kubevalidating.EvalError {
				e.v.cfg.Logger.WarnContext(ctx, "validating admission policy failed, ignoring it", "policy", p.Name, "binding", b.Name, "err", d.Message)
				e.v.metrics.observe(p.Name, b.Name, errType, "allow", d.Elapsed)
			}
		case kubevalidating.ActionDeny:
			for _, action := range b.Spec.ValidationActions {
				switch action {
				case admissionregistrationv1.Deny:
					e.denied = append(e.denied, denial{PolicyDecision: d, policy: p, binding: b})
					e.v.metrics.observe(p.Name, b.Name, errType, "deny", d.Elapsed)
				case admissionregistrationv1.Audit:
					e.failures = append(e.failures, kubevalidating.ValidationFailureValue{
						ExpressionIndex:   i,
						Message:           d.Message,
						ValidationActions: b.Spec.ValidationActions,
						Binding:           b.Name,
						Policy:            b.Spec.PolicyName,
					})
					e.v.metrics.observe(p.Name, b.Name, errType, "audit", d.Elapsed)
				case admissionregistrationv1.Warn:
					e.warn(fmt.Sprintf("Validation failed for ValidatingAdmissionPolicy '%s' with binding '%s': %s", p.Name, b.Name, d.Message))
					e.v.metrics.observe(p.Name, b.Name, errType, "warn", d.Elapsed)
				}
			}
		default:
			return fmt.Errorf("unrecognized evaluation decision '%s' for ValidatingAdmissionPolicyBinding '%s' with ValidatingAdmissionPolicy '%s'", d.Action, b.Name, p.Name)
		}
	}
	for _, an := range result.AuditAnnotations {
		switch an.Action {
		case kubevalidating.AuditAnnotationActionPublish:
			value := an.Value
			if len(value) > maxAuditAnnotationValueLength {
				value = value[:maxAuditAnnotationValueLength]
			}
			annotations.add(an.Key, value)
		case kubevalidating.AuditAnnotationActionError:
			d := kubevalidating.PolicyDecision{Action: kubevalidating.ActionDeny, Evaluation: kubevalidating.EvalError, Message: an.Error, Elapsed: an.Elapsed}
			e.denied = append(e.denied, denial{PolicyDecision: d, policy: p, binding: b})
			e.v.metrics.observe(p.Name, b.Name, string(kubevalidating.ErrorType(&d)), "deny", an.Elapsed)
		case kubevalidating.AuditAnnotationActionExclude:
		default:
			return fmt.Errorf("unsupported AuditAnnotation Action: %s", an.Action)
		}
	}
	return nil
}

func (e *evaluation) warn(w string) {
	for _, have := range e.warnings {
		if have == w {
			return
		}
	}
	e.warnings = append(e.warnings, w)
}

func (e *evaluation) annotate(k, v string) {
	if e.annotation == nil {
		e.annotation = map[string]string{}
	}
	e.annotation[k] = v
}

// finish turns what the policies said into the Result and, when a
// binding with the Deny action refused the write, kube's refusal: the
// first one's message, reason and code.
func (e *evaluation) finish() (*Result, error) {
	if len(e.failures) > 0 {
		failures := e.failures
		if len(failures) > maxValidationFailures {
			failures = failures[:maxValidationFailures]
		}
		value, err := json.Marshal(failures)
		if err != nil {
			return nil, fmt.Errorf("encode the %s audit annotation: %w", validationFailureAnnotation, err)
		}
		e.annotate(validationFailureAnnotation, string(value))
	}
	res := &Result{Warnings: e.warnings, AuditAnnotations: e.annotation}
	if len(e.denied) == 0 {
		return res, nil
	}
	d := e.denied[0]
	var message string
	if d.binding != nil {
		message = fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: %s", d.policy.Name, d.binding.Name, d.Message)
	} else {
		message = fmt.Sprintf("ValidatingAdmissionPolicy '%s' denied request: %s", d.policy.Name, d.Message)
	}
	var err *apierrors.StatusError
	if !errors.As(admission.NewForbidden(e.va.Attributes, errors.New(message)), &err) {
		return nil, apierrors.NewInternalError(errors.New(message))
	}
	reason := d.Reason
	if reason == "" {
		reason = metav1.StatusReasonInvalid
	}
	err.ErrStatus.Reason = reason
	err.ErrStatus.Code = reasonToCode(reason)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Message: message})
	return res, err
}

// reasonToCode is kube's mapping of a validation's reason to the HTTP
// code of the refusal.
func reasonToCode(r metav1.StatusReason) int32 {
	switch r {
	case metav1.StatusReasonForbidden:
		return 403
	case metav1.StatusReasonUnauthorized:
		return 401
	case metav1.StatusReasonRequestEntityTooLarge:
		return 413
	default:
		return 422
	}
}

// auditAnnotations gathers one policy's audit annotations over its
// bindings; distinct values of a key are joined as kube joins them.
type auditAnnotations map[string][]string

func (a auditAnnotations) add(key, value string) {
	for _, v := range a[key] {
		if v == value {
			return
		}
	}
	a[key] = append(a[key], value)
}

func (a auditAnnotations) values(policy string) map[string]string {
	out := make(map[string]string, len(a))
	for k, vs := range a {
		out[policy+"/"+k] = strings.Join(vs, ", ")
	}
	return out
}

// paramKind is a policy's paramKind as the Params read it.
type paramKind struct {
	gvk        schema.GroupVersionKind
	namespaced bool
}
