package admissionregistration

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/util/jsonpath"
)

const (
	maxAuditAnnotations = 20
	// An audit annotation value may be 10 KiB; the expression is held
	// to less because concatenation makes values longer than the
	// expression that builds them.
	maxAuditAnnotationValueExpressionLength = 5 * 1024
)

// validatePolicyCommon checks what both kinds of admission policy
// declare alike: failurePolicy, paramKind and matchConstraints.
func validatePolicyCommon(failurePolicy *admissionv1.FailurePolicyType, paramKind *admissionv1.ParamKind, constraints *admissionv1.MatchResources, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if failurePolicy == nil {
		errs = append(errs, field.Required(fldPath.Child("failurePolicy"), ""))
	} else if !slices.Contains(failurePolicies, string(*failurePolicy)) {
		errs = append(errs, field.NotSupported(fldPath.Child("failurePolicy"), *failurePolicy, failurePolicies))
	}
	if paramKind != nil {
		errs = append(errs, validateParamKind(*paramKind, fldPath.Child("paramKind"))...)
	}
	if constraints == nil {
		return append(errs, field.Required(fldPath.Child("matchConstraints"), ""))
	}
	errs = append(errs, validateMatchResources(constraints, fldPath.Child("matchConstraints"))...)
	// The resource rules give the expressions their object types.
	if len(constraints.ResourceRules) == 0 {
		errs = append(errs, field.Required(fldPath.Child("matchConstraints", "resourceRules"), ""))
	}
	return errs
}

func validatePolicy(pol *admissionv1.ValidatingAdmissionPolicy, skipMatchConditions bool) field.ErrorList {
	spec := &pol.Spec
	fldPath := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validatePolicyCommon(spec.FailurePolicy, spec.ParamKind, spec.MatchConstraints, fldPath)...)
	if !skipMatchConditions {
		errs = append(errs, validateMatchConditions(spec.MatchConditions, fldPath.Child("matchConditions"))...)
	}
	for i := range spec.Variables {
		errs = append(errs, validateVariable(&spec.Variables[i], fldPath.Child("variables").Index(i))...)
	}
	if len(spec.Validations) == 0 && len(spec.AuditAnnotations) == 0 {
		const msg = "validations or auditAnnotations must contain at least one item"
		return append(errs,
			field.Required(fldPath.Child("validations"), msg),
			field.Required(fldPath.Child("auditAnnotations"), msg))
	}
	for i := range spec.Validations {
		errs = append(errs, validateValidation(&spec.Validations[i], fldPath.Child("validations").Index(i))...)
	}
	if len(spec.AuditAnnotations) > maxAuditAnnotations {
		errs = append(errs, field.Invalid(fldPath.Child("auditAnnotations"), spec.AuditAnnotations, fmt.Sprintf("must not have more than %d auditAnnotations", maxAuditAnnotations)))
	}
	keys := sets.New[string]()
	for i := range spec.AuditAnnotations {
		a := &spec.AuditAnnotations[i]
		p := fldPath.Child("auditAnnotations").Index(i)
		errs = append(errs, validateAuditAnnotation(p, a, pol.Name)...)
		if keys.Has(a.Key) {
			errs = append(errs, field.Duplicate(p.Child("key"), a.Key))
		}
		keys.Insert(a.Key)
	}
	return errs
}

func validateParamKind(pk admissionv1.ParamKind, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pk.APIVersion == "" {
		errs = append(errs, field.Required(fldPath.Child("apiVersion"), ""))
	} else if group, version, err := parseGroupVersion(pk.APIVersion); err != nil {
		errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), pk.APIVersion, err.Error()))
	} else {
		// The same rules as an APIService's group and version.
		if group != "" {
			if msgs := utilvalidation.IsDNS1123Subdomain(group); len(msgs) > 0 {
				errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), group, strings.Join(msgs, ",")))
			}
		}
		if version == "" {
			errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), pk.APIVersion, "version must be specified"))
		} else if msgs := utilvalidation.IsDNS1035Label(version); len(msgs) > 0 {
			errs = append(errs, field.Invalid(fldPath.Child("apiVersion"), version, strings.Join(msgs, ",")))
		}
	}
	if pk.Kind == "" {
		errs = append(errs, field.Required(fldPath.Child("kind"), ""))
	} else if msgs := utilvalidation.IsDNS1035Label(strings.ToLower(pk.Kind)); len(msgs) > 0 {
		errs = append(errs, field.Invalid(fldPath.Child("kind"), pk.Kind, "may have mixed case, but should otherwise match: "+strings.Join(msgs, ",")))
	}
	return errs
}

// parseGroupVersion splits "group/version" as kube's policy validation
// does: unlike schema.ParseGroupVersion it accepts "group/" so that the
// missing version gets its own message.
func parseGroupVersion(gv string) (group, version string, err error) {
	if gv == "" || gv == "/" {
		return "", "", nil
	}
	switch strings.Count(gv, "/") {
	case 0:
		return "", gv, nil
	case 1:
		group, version, _ = strings.Cut(gv, "/")
		return group, version, nil
	default:
		return "", "", fmt.Errorf("unexpected GroupVersion string: %v", gv)
	}
}

func validateMatchResources(m *admissionv1.MatchResources, fldPath *field.Path) field.ErrorList {
	if m == nil {
		return nil
	}
	var errs field.ErrorList
	if m.MatchPolicy == nil {
		errs = append(errs, field.Required(fldPath.Child("matchPolicy"), ""))
	} else if !slices.Contains(matchPolicies, string(*m.MatchPolicy)) {
		errs = append(errs, field.NotSupported(fldPath.Child("matchPolicy"), *m.MatchPolicy, matchPolicies))
	}
	// Selectors of these kinds are checked strictly: the kinds were
	// released after label values in selectors were, unlike webhooks'.
	if m.NamespaceSelector == nil {
		errs = append(errs, field.Required(fldPath.Child("namespaceSelector"), ""))
	} else {
		errs = append(errs, validateSelector(m.NamespaceSelector, false, fldPath.Child("namespaceSelector"))...)
	}
	if m.ObjectSelector == nil {
		errs = append(errs, field.Required(fldPath.Child("objectSelector"), ""))
	} else {
		errs = append(errs, validateSelector(m.ObjectSelector, false, fldPath.Child("objectSelector"))...)
	}
	for i := range m.ResourceRules {
		errs = append(errs, validateNamedRule(&m.ResourceRules[i], fldPath.Child("resourceRules").Index(i))...)
	}
	for i := range m.ExcludeResourceRules {
		errs = append(errs, validateNamedRule(&m.ExcludeResourceRules[i], fldPath.Child("excludeResourceRules").Index(i))...)
	}
	return errs
}

func validateNamedRule(r *admissionv1.NamedRuleWithOperations, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, name := range r.ResourceNames {
		p := fldPath.Child("resourceNames").Index(i)
		for _, msg := range content.IsPathSegmentName(name) {
			errs = append(errs, field.Invalid(p, name, msg))
		}
		if names.Has(name) {
			errs = append(errs, field.Duplicate(p, name))
		}
		names.Insert(name)
	}
	return append(errs, validateRuleWithOperations(&r.RuleWithOperations, fldPath)...)
}

var celIdentifier = regexp.MustCompile(`^[_a-zA-Z][_a-zA-Z0-9]*$`)

// celReserved are CEL's reserved words, which cannot name a variable.
var celReserved = []string{
	"true", "false", "null", "in",
	"as", "break", "const", "continue", "else",
	"for", "function", "if", "import", "let",
	"loop", "package", "namespace", "return",
	"var", "void", "while",
}

func validateVariable(v *admissionv1.Variable, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Name) == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "name is not specified"))
	} else if !celIdentifier.MatchString(v.Name) || slices.Contains(celReserved, v.Name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), v.Name, "name is not a valid CEL identifier"))
	}
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(fldPath.Child("expression"), "expression is not specified"))
	}
	return errs
}

var newlines = regexp.MustCompile(`[\n\r]+`)

func validateValidation(v *admissionv1.Validation, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if strings.TrimSpace(v.Expression) == "" {
		errs = append(errs, field.Required(fldPath.Child("expression"), "expression is not specified"))
	}
	if v.MessageExpression != "" && strings.TrimSpace(v.MessageExpression) == "" {
		errs = append(errs, field.Invalid(fldPath.Child("messageExpression"), v.MessageExpression, "must be non-empty if specified"))
	}
	msg := strings.TrimSpace(v.Message)
	if v.Message != "" && msg == "" {
		errs = append(errs, field.Invalid(fldPath.Child("message"), v.Message, "message must be non-empty if specified"))
	} else if newlines.MatchString(msg) {
		errs = append(errs, field.Invalid(fldPath.Child("message"), v.Message, "message must not contain line breaks"))
	}
	if v.Reason != nil && !slices.Contains(validationReasons, string(*v.Reason)) {
		errs = append(errs, field.NotSupported(fldPath.Child("reason"), *v.Reason, validationReasons))
	}
	return errs
}

// validateAuditAnnotation checks one annotation. Its key becomes the
// audit annotation "<policy name>/<key>", which must be a qualified name.
func validateAuditAnnotation(fldPath *field.Path, a *admissionv1.AuditAnnotation, policyName string) field.ErrorList {
	var errs field.ErrorList
	if policyName != "" {
		errs = append(errs, validateQualifiedName(policyName+"/"+a.Key, fldPath.Child("key"))...)
	} else {
		errs = append(errs, field.Invalid(fldPath.Child("key"), a.Key, "requires metadata.name be non-empty"))
	}
	value := strings.TrimSpace(a.ValueExpression)
	switch {
	case value == "":
		errs = append(errs, field.Required(fldPath.Child("valueExpression"), "valueExpression is not specified"))
	case len(value) > maxAuditAnnotationValueExpressionLength:
		errs = append(errs, field.Required(fldPath.Child("valueExpression"), fmt.Sprintf("must not exceed %d bytes in length", maxAuditAnnotationValueExpressionLength)))
	}
	return errs
}

// skipPolicyMatchConditions is true when an update leaves what the match
// conditions are checked against as it was, so conditions stored under
// older rules stay acceptable.
func skipPolicyMatchConditions(p, old *admissionv1.ValidatingAdmissionPolicy) bool {
	return reflect.DeepEqual(p.Spec.ParamKind, old.Spec.ParamKind) &&
		reflect.DeepEqual(p.Spec.MatchConditions, old.Spec.MatchConditions)
}

func validatePolicyStatus(s *admissionv1.ValidatingAdmissionPolicyStatus) field.ErrorList {
	fldPath := field.NewPath("status")
	var errs field.ErrorList
	if s.TypeChecking != nil {
		for i, w := range s.TypeChecking.ExpressionWarnings {
			p := fldPath.Child("typeChecking", "expressionWarnings").Index(i)
			if w.Warning == "" {
				errs = append(errs, field.Required(p.Child("warning"), ""))
			}
			errs = append(errs, validateFieldRef(w.FieldRef, p.Child("fieldRef"))...)
		}
	}
	return append(errs, metav1validation.ValidateConditions(s.Conditions, fldPath.Child("conditions"))...)
}

func validateFieldRef(ref string, fldPath *field.Path) field.ErrorList {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if err := jsonpath.New("spec").Parse(fmt.Sprintf("{%s}", ref)); err != nil {
		return field.ErrorList{field.Invalid(fldPath, ref, fmt.Sprintf("invalid JSONPath: %v", err))}
	}
	return nil
}

func validateBinding(b *admissionv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	spec := &b.Spec
	fldPath := field.NewPath("spec")
	var errs field.ErrorList
	if spec.PolicyName == "" {
		errs = append(errs, field.Required(fldPath.Child("policyName"), ""))
	} else {
		for _, msg := range genericvalidation.NameIsDNSSubdomain(spec.PolicyName, false) {
			errs = append(errs, field.Invalid(fldPath.Child("policyName"), spec.PolicyName, msg))
		}
	}
	errs = append(errs, validateParamRef(spec.ParamRef, fldPath.Child("paramRef"))...)
	errs = append(errs, validateMatchResources(spec.MatchResources, fldPath.Child("matchResources"))...)
	return append(errs, validateValidationActions(spec.ValidationActions, fldPath.Child("validationActions"))...)
}

func validateParamRef(r *admissionv1.ParamRef, fldPath *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	const exclusive = "name and selector are mutually exclusive"
	if r.Name != "" {
		for _, msg := range content.IsPathSegmentName(r.Name) {
			errs = append(errs, field.Invalid(fldPath.Child("name"), r.Name, msg))
		}
		if r.Selector != nil {
			errs = append(errs, field.Forbidden(fldPath.Child("name"), exclusive))
		}
	}
	if r.Selector != nil {
		errs = append(errs, validateSelector(r.Selector, false, fldPath.Child("selector"))...)
		if r.Name != "" {
			errs = append(errs, field.Forbidden(fldPath.Child("selector"), exclusive))
		}
	}
	if r.Name == "" && r.Selector == nil {
		errs = append(errs, field.Required(fldPath, "one of name or selector must be specified"))
	}
	actions := []string{string(admissionv1.DenyAction), string(admissionv1.AllowAction)}
	switch a := r.ParameterNotFoundAction; {
	case a == nil || *a == "":
		errs = append(errs, field.Required(fldPath.Child("parameterNotFoundAction"), ""))
	case !slices.Contains(actions, string(*a)):
		errs = append(errs, field.NotSupported(fldPath.Child("parameterNotFoundAction"), *a, actions))
	}
	return errs
}

func validateValidationActions(actions []admissionv1.ValidationAction, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[admissionv1.ValidationAction]()
	for i, a := range actions {
		if !slices.Contains(validationActions, string(a)) {
			errs = append(errs, field.NotSupported(fldPath.Index(i), a, validationActions))
		}
		if seen.Has(a) {
			errs = append(errs, field.Duplicate(fldPath.Index(i), a))
		}
		seen.Insert(a)
	}
	if seen.Has(admissionv1.Deny) && seen.Has(admissionv1.Warn) {
		errs = append(errs, field.Invalid(fldPath, actions, "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"))
	}
	if len(seen) == 0 {
		errs = append(errs, field.Required(fldPath, "at least one validation action is required"))
	}
	return errs
}
