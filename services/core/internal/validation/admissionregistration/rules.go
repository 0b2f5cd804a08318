package admissionregistration

import (
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The value sets kube checks against, in the sorted order kube lists
// them in "supported values" messages.
var (
	failurePolicies      = []string{string(admissionv1.Fail), string(admissionv1.Ignore)}
	matchPolicies        = []string{string(admissionv1.Equivalent), string(admissionv1.Exact)}
	operations           = []string{string(admissionv1.OperationAll), string(admissionv1.Connect), string(admissionv1.Create), string(admissionv1.Delete), string(admissionv1.Update)}
	scopes               = []string{string(admissionv1.AllScopes), string(admissionv1.ClusterScope), string(admissionv1.NamespacedScope)}
	noSideEffects        = []string{string(admissionv1.SideEffectClassNone), string(admissionv1.SideEffectClassNoneOnDryRun)}
	anySideEffects       = []string{string(admissionv1.SideEffectClassNone), string(admissionv1.SideEffectClassNoneOnDryRun), string(admissionv1.SideEffectClassSome), string(admissionv1.SideEffectClassUnknown)}
	reinvocationPolicies = []string{string(admissionv1.IfNeededReinvocationPolicy), string(admissionv1.NeverReinvocationPolicy)}
	validationActions    = []string{string(admissionv1.Audit), string(admissionv1.Deny), string(admissionv1.Warn)}
	validationReasons    = []string{string(metav1.StatusReasonForbidden), string(metav1.StatusReasonInvalid), string(metav1.StatusReasonRequestEntityTooLarge)}
	// admissionReviewVersions are the AdmissionReview versions kube
	// sends; a webhook must accept one of them.
	admissionReviewVersions = []string{"v1", "v1beta1"}
)

func hasWildcard[S ~string](values []S) bool {
	return slices.Contains(values, "*")
}

func validateRuleWithOperations(r *admissionv1.RuleWithOperations, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(fldPath.Child("operations"), ""))
	}
	if len(r.Operations) > 1 && hasWildcard(r.Operations) {
		errs = append(errs, field.Invalid(fldPath.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
	}
	for i, op := range r.Operations {
		if !slices.Contains(operations, string(op)) {
			errs = append(errs, field.NotSupported(fldPath.Child("operations").Index(i), op, operations))
		}
	}
	return append(errs, validateRule(&r.Rule, fldPath)...)
}

func validateRule(r *admissionv1.Rule, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(fldPath.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && hasWildcard(r.APIGroups) {
		errs = append(errs, field.Invalid(fldPath.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	// An empty group is fine: it is the legacy core group.
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(fldPath.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && hasWildcard(r.APIVersions) {
		errs = append(errs, field.Invalid(fldPath.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(fldPath.Child("apiVersions").Index(i), ""))
		}
	}
	errs = append(errs, validateResources(r.Resources, fldPath.Child("resources"))...)
	if r.Scope != nil && !slices.Contains(scopes, string(*r.Scope)) {
		errs = append(errs, field.NotSupported(fldPath.Child("scope"), *r.Scope, scopes))
	}
	return errs
}

// validateResources checks resource/subresource patterns: a wildcard may
// not be combined with what it already covers.
func validateResources(resources []string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(resources) == 0 {
		errs = append(errs, field.Required(fldPath, ""))
	}
	wildcardSubresourceOf := sets.New[string]() // x/*
	wildcardResourceOf := sets.New[string]()    // */x
	doubleWildcard, singleWildcard, plainResource := false, false, false
	for i, rs := range resources {
		if rs == "" {
			errs = append(errs, field.Required(fldPath.Index(i), ""))
			continue
		}
		switch rs {
		case "*/*":
			doubleWildcard = true
		case "*":
			singleWildcard = true
		}
		res, sub, found := strings.Cut(rs, "/")
		if !found {
			// Kube keeps only the last entry's answer here, so "pods"
			// before "*" goes unnoticed; matched for identical results.
			plainResource = rs != "*"
			continue
		}
		if wildcardSubresourceOf.Has(res) {
			errs = append(errs, field.Invalid(fldPath.Index(i), rs, fmt.Sprintf("if '%s/*' is present, must not specify %s", res, rs)))
		}
		if wildcardResourceOf.Has(sub) {
			errs = append(errs, field.Invalid(fldPath.Index(i), rs, fmt.Sprintf("if '*/%s' is present, must not specify %s", sub, rs)))
		}
		if sub == "*" {
			wildcardSubresourceOf.Insert(res)
		}
		if res == "*" {
			wildcardResourceOf.Insert(sub)
		}
	}
	if len(resources) > 1 && doubleWildcard {
		errs = append(errs, field.Invalid(fldPath, resources, "if '*/*' is present, must not specify other resources"))
	}
	if singleWildcard && plainResource {
		errs = append(errs, field.Invalid(fldPath, resources, "if '*' is present, must not specify other resources without subresources"))
	}
	return errs
}

func validateSelector(s *metav1.LabelSelector, allowInvalidLabelValue bool, fldPath *field.Path) field.ErrorList {
	if s == nil {
		return nil
	}
	opts := metav1validation.LabelSelectorValidationOptions{AllowInvalidLabelValueInSelector: allowInvalidLabelValue}
	return metav1validation.ValidateLabelSelector(s, opts, fldPath)
}

// validateMatchConditions checks names and the presence of expressions;
// see the package documentation for why expressions are not compiled.
func validateMatchConditions(conditions []admissionv1.MatchCondition, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	const maxMatchConditions = 64
	if len(conditions) > maxMatchConditions {
		errs = append(errs, field.TooMany(fldPath, len(conditions), maxMatchConditions))
	}
	names := sets.New[string]()
	for i, c := range conditions {
		p := fldPath.Index(i)
		if strings.TrimSpace(c.Expression) == "" {
			errs = append(errs, field.Required(p.Child("expression"), ""))
		}
		if c.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		} else {
			errs = append(errs, validateQualifiedName(c.Name, p.Child("name"))...)
		}
		if c.Name != "" {
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(p.Child("name"), c.Name))
			}
			names.Insert(c.Name)
		}
	}
	return errs
}

// validateQualifiedName is kube's ValidateQualifiedName: a label key.
func validateQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}
