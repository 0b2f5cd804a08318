package reviews

import (
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalidKind is how kube names a review in its 422: its registry builds
// the error from the decoded internal object, whose kind is empty, so
// only the group shows (`.authorization.k8s.io "" is invalid`).
var invalidKind = schema.GroupKind{Group: authorizationv1.GroupName}

// ValidateSubjectAccessReview is kube's validation of a
// SubjectAccessReview.
func ValidateSubjectAccessReview(sar *authorizationv1.SubjectAccessReview) field.ErrorList {
	errs := validateSpec(sar.Spec, field.NewPath("spec"))
	if !metaEmpty(sar.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, `must be empty`))
	}
	return errs
}

// ValidateSelfSubjectAccessReview is kube's validation of a
// SelfSubjectAccessReview: the user is the caller, so none is required.
func ValidateSelfSubjectAccessReview(sar *authorizationv1.SelfSubjectAccessReview) field.ErrorList {
	errs := validateUnion(sar.Spec.ResourceAttributes, sar.Spec.NonResourceAttributes, field.NewPath("spec"))
	errs = append(errs, validateSelectors(sar.Spec.ResourceAttributes)...)
	if !metaEmpty(sar.ObjectMeta, false) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, `must be empty`))
	}
	return errs
}

// ValidateLocalSubjectAccessReview is kube's validation of a
// LocalSubjectAccessReview: it asks about its own namespace only.
func ValidateLocalSubjectAccessReview(sar *authorizationv1.LocalSubjectAccessReview) field.ErrorList {
	errs := validateSpec(sar.Spec, field.NewPath("spec"))
	if !metaEmpty(sar.ObjectMeta, true) {
		errs = append(errs, field.Invalid(field.NewPath("metadata"), sar.ObjectMeta, `must be empty except for namespace`))
	}
	if ra := sar.Spec.ResourceAttributes; ra != nil && ra.Namespace != sar.Namespace {
		errs = append(errs, field.Invalid(field.NewPath("spec.resourceAttributes.namespace"), ra.Namespace, `must match metadata.namespace`))
	}
	if sar.Spec.NonResourceAttributes != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec.nonResourceAttributes"), sar.Spec.NonResourceAttributes, `disallowed on this kind of request`))
	}
	return errs
}

func validateSpec(spec authorizationv1.SubjectAccessReviewSpec, fld *field.Path) field.ErrorList {
	errs := validateUnion(spec.ResourceAttributes, spec.NonResourceAttributes, fld)
	if spec.User == "" && len(spec.Groups) == 0 {
		errs = append(errs, field.Invalid(fld.Child("user"), spec.User, `at least one of user or group must be specified`))
	}
	return append(errs, validateSelectors(spec.ResourceAttributes)...)
}

// validateUnion checks that exactly one kind of attributes is set.
func validateUnion(ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes, fld *field.Path) field.ErrorList {
	errs := field.ErrorList{}
	if ra != nil && nra != nil {
		errs = append(errs, field.Invalid(fld.Child("nonResourceAttributes"), nra, `cannot be specified in combination with resourceAttributes`))
	}
	if ra == nil && nra == nil {
		errs = append(errs, field.Invalid(fld.Child("resourceAttributes"), nra, `exactly one of nonResourceAttributes or resourceAttributes must be specified`))
	}
	return errs
}

func validateSelectors(ra *authorizationv1.ResourceAttributes) field.ErrorList {
	if ra == nil {
		return nil
	}
	fld := field.NewPath("spec.resourceAttributes")
	var errs field.ErrorList
	if s := ra.FieldSelector; s != nil {
		p := fld.Child("fieldSelector")
		errs = append(errs, rawOrRequirements(s.RawSelector, len(s.Requirements), p)...)
		opts := metav1validation.FieldSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, r := range s.Requirements {
			errs = append(errs, metav1validation.ValidateFieldSelectorRequirement(r, opts, p.Child("requirements").Index(i))...)
		}
	}
	if s := ra.LabelSelector; s != nil {
		p := fld.Child("labelSelector")
		errs = append(errs, rawOrRequirements(s.RawSelector, len(s.Requirements), p)...)
		opts := metav1validation.LabelSelectorValidationOptions{AllowUnknownOperatorInRequirement: true}
		for i, r := range s.Requirements {
			errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(r, opts, p.Child("requirements").Index(i))...)
		}
	}
	return errs
}

func rawOrRequirements(raw string, requirements int, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if raw != "" && requirements > 0 {
		errs = append(errs, field.Invalid(fld.Child("rawSelector"), raw, "may not specified at the same time as requirements"))
	}
	if raw == "" && requirements == 0 {
		errs = append(errs, field.Required(fld.Child("requirements"), fmt.Sprintf("when %s is specified, requirements or rawSelector is required", fld)))
	}
	return errs
}

// metaEmpty reports whether a review's metadata says nothing but,
// where allowed, its namespace; managed fields do not count.
func metaEmpty(m metav1.ObjectMeta, namespaceAllowed bool) bool {
	m.ManagedFields = nil
	if namespaceAllowed {
		m.Namespace = ""
	}
	return apiequality.Semantic.DeepEqual(metav1.ObjectMeta{}, m)
}
