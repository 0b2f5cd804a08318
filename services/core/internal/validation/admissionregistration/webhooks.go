package admissionregistration

import (
	"fmt"
	"net/url"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// webhook is what validating and mutating webhooks share, so one
// function checks both in kube's order.
type webhook struct {
	name                    string
	clientConfig            admissionv1.WebhookClientConfig
	rules                   []admissionv1.RuleWithOperations
	failurePolicy           *admissionv1.FailurePolicyType
	matchPolicy             *admissionv1.MatchPolicyType
	namespaceSelector       *metav1.LabelSelector
	objectSelector          *metav1.LabelSelector
	sideEffects             *admissionv1.SideEffectClass
	timeoutSeconds          *int32
	admissionReviewVersions []string
	matchConditions         []admissionv1.MatchCondition
	// reinvocationPolicy is nil for validating webhooks, which have none,
	// and defaulted for mutating ones.
	reinvocationPolicy *admissionv1.ReinvocationPolicyType
}

func validatingWebhooks(hooks []admissionv1.ValidatingWebhook) []webhook {
	out := make([]webhook, len(hooks))
	for i, h := range hooks {
		out[i] = webhook{
			name: h.Name, clientConfig: h.ClientConfig, rules: h.Rules,
			failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
			namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector,
			sideEffects: h.SideEffects, timeoutSeconds: h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions,
		}
	}
	return out
}

func mutatingWebhooks(hooks []admissionv1.MutatingWebhook) []webhook {
	out := make([]webhook, len(hooks))
	for i, h := range hooks {
		out[i] = webhook{
			name: h.Name, clientConfig: h.ClientConfig, rules: h.Rules,
			failurePolicy: h.FailurePolicy, matchPolicy: h.MatchPolicy,
			namespaceSelector: h.NamespaceSelector, objectSelector: h.ObjectSelector,
			sideEffects: h.SideEffects, timeoutSeconds: h.TimeoutSeconds,
			admissionReviewVersions: h.AdmissionReviewVersions, matchConditions: h.MatchConditions,
			reinvocationPolicy: h.ReinvocationPolicy,
		}
	}
	return out
}

// webhookOptions relax rules for updates: kube lets an object that was
// stored under older, looser rules be updated as long as the update does
// not touch what the rule is about, so tightening a rule never strands
// an existing object.
type webhookOptions struct {
	// skipMatchConditions is set when an update leaves every webhook's
	// match conditions as they were.
	skipMatchConditions              bool
	requireNoSideEffects             bool
	requireRecognizedAdmissionReview bool
	requireUniqueNames               bool
	allowInvalidLabelValueInSelector bool
}

func createOptions() webhookOptions {
	return webhookOptions{
		requireNoSideEffects:             true,
		requireRecognizedAdmissionReview: true,
		requireUniqueNames:               true,
	}
}

func updateOptions(hooks, old []webhook) webhookOptions {
	opts := webhookOptions{
		skipMatchConditions:              len(hooks) == len(old),
		requireNoSideEffects:             true,
		requireRecognizedAdmissionReview: true,
		requireUniqueNames:               true,
	}
	if opts.skipMatchConditions {
		for i := range old {
			if !reflect.DeepEqual(hooks[i].matchConditions, old[i].matchConditions) {
				opts.skipMatchConditions = false
			}
		}
	}
	names := sets.New[string]()
	for _, h := range old {
		if h.sideEffects == nil || !slices.Contains(noSideEffects, string(*h.sideEffects)) {
			opts.requireNoSideEffects = false
		}
		if len(h.admissionReviewVersions) > 0 && !slices.ContainsFunc(h.admissionReviewVersions, isAdmissionReviewVersion) {
			opts.requireRecognizedAdmissionReview = false
		}
		if names.Has(h.name) {
			opts.requireUniqueNames = false
		}
		names.Insert(h.name)
		for _, s := range []*metav1.LabelSelector{h.namespaceSelector, h.objectSelector} {
			if s != nil && len(metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, nil)) > 0 {
				opts.allowInvalidLabelValueInSelector = true
			}
		}
	}
	return opts
}

func isAdmissionReviewVersion(v string) bool {
	return slices.Contains(admissionReviewVersions, v)
}

func validateWebhooks(hooks []webhook, opts webhookOptions) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validateWebhook(&hooks[i], opts, p)...)
		errs = append(errs, validateAdmissionReviewVersions(hooks[i].admissionReviewVersions, opts.requireRecognizedAdmissionReview, p.Child("admissionReviewVersions"))...)
		if name := hooks[i].name; opts.requireUniqueNames && name != "" {
			if names.Has(name) {
				errs = append(errs, field.Duplicate(p.Child("name"), name))
			}
			names.Insert(name)
		}
	}
	return errs
}

func validateWebhook(h *webhook, opts webhookOptions, fldPath *field.Path) field.ErrorList {
	errs := validateFullyQualifiedName(h.name, fldPath.Child("name"))
	for i := range h.rules {
		errs = append(errs, validateRuleWithOperations(&h.rules[i], fldPath.Child("rules").Index(i))...)
	}
	if h.failurePolicy != nil && !slices.Contains(failurePolicies, string(*h.failurePolicy)) {
		errs = append(errs, field.NotSupported(fldPath.Child("failurePolicy"), *h.failurePolicy, failurePolicies))
	}
	if h.matchPolicy != nil && !slices.Contains(matchPolicies, string(*h.matchPolicy)) {
		errs = append(errs, field.NotSupported(fldPath.Child("matchPolicy"), *h.matchPolicy, matchPolicies))
	}
	sideEffects := anySideEffects
	if opts.requireNoSideEffects {
		sideEffects = noSideEffects
	}
	if h.sideEffects == nil {
		errs = append(errs, field.Required(fldPath.Child("sideEffects"), "must specify one of "+strings.Join(sideEffects, ", ")))
	} else if !slices.Contains(sideEffects, string(*h.sideEffects)) {
		errs = append(errs, field.NotSupported(fldPath.Child("sideEffects"), *h.sideEffects, sideEffects))
	}
	if t := h.timeoutSeconds; t != nil && (*t > 30 || *t < 1) {
		errs = append(errs, field.Invalid(fldPath.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
	}
	errs = append(errs, validateSelector(h.namespaceSelector, opts.allowInvalidLabelValueInSelector, fldPath.Child("namespaceSelector"))...)
	errs = append(errs, validateSelector(h.objectSelector, opts.allowInvalidLabelValueInSelector, fldPath.Child("objectSelector"))...)
	if r := h.reinvocationPolicy; r != nil && !slices.Contains(reinvocationPolicies, string(*r)) {
		errs = append(errs, field.NotSupported(fldPath.Child("reinvocationPolicy"), *r, reinvocationPolicies))
	}
	errs = append(errs, validateClientConfig(h.clientConfig, fldPath.Child("clientConfig"))...)
	if !opts.skipMatchConditions {
		errs = append(errs, validateMatchConditions(h.matchConditions, fldPath.Child("matchConditions"))...)
	}
	return errs
}

// validateFullyQualifiedName is kube's IsFullyQualifiedName: a webhook is
// named after the domain of whoever runs it, with at least three parts.
func validateFullyQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	if msgs := utilvalidation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return field.ErrorList{field.Invalid(fldPath, name, strings.Join(msgs, ","))}
	}
	if len(strings.Split(name, ".")) < 3 {
		return field.ErrorList{field.Invalid(fldPath, name, "should be a domain with at least three segments separated by dots")}
	}
	return nil
}

func validateAdmissionReviewVersions(versions []string, requireRecognized bool, fldPath *field.Path) field.ErrorList {
	known := strings.Join(admissionReviewVersions, ", ")
	if len(versions) == 0 {
		return field.ErrorList{field.Required(fldPath, "must specify one of "+known)}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(fldPath.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		for _, msg := range utilvalidation.IsDNS1035Label(v) {
			errs = append(errs, field.Invalid(fldPath.Index(i), v, msg))
		}
	}
	if requireRecognized && !slices.ContainsFunc(versions, isAdmissionReviewVersion) {
		errs = append(errs, field.Invalid(fldPath, versions, "must include at least one of "+known))
	}
	return errs
}

func validateClientConfig(cc admissionv1.WebhookClientConfig, fldPath *field.Path) field.ErrorList {
	switch {
	case (cc.URL == nil) == (cc.Service == nil):
		return field.ErrorList{field.Required(fldPath, "exactly one of url or service is required")}
	case cc.URL != nil:
		return validateURL(*cc.URL, fldPath.Child("url"))
	default:
		return validateService(cc.Service, fldPath.Child("service"))
	}
}

// validateURL is kube's ValidateWebhookURL with https forced: the API
// server sends admission reviews, which carry object contents, only over
// TLS, and only to a plain host and path.
func validateURL(raw string, fldPath *field.Path) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(fldPath, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Scheme != "https" {
		errs = append(errs, field.Invalid(fldPath, u.Scheme, "'https' is the only allowed URL scheme"+form))
	}
	if u.Host == "" {
		errs = append(errs, field.Invalid(fldPath, u.Host, "host must be provided"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(fldPath, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(fldPath, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(fldPath, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateService is kube's ValidateWebhookService. Kube v1.37 passes
// the name and namespace to it swapped, so a missing name is reported as
// a missing namespace (kubernetes/kubernetes#141353); this reports each
// under its own field.
func validateService(s *admissionv1.ServiceReference, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.Name == "" {
		errs = append(errs, field.Required(fldPath.Child("name"), "service name is required"))
	}
	if s.Namespace == "" {
		errs = append(errs, field.Required(fldPath.Child("namespace"), "service namespace is required"))
	}
	port := int32(443)
	if s.Port != nil {
		port = *s.Port
	}
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(fldPath.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path == nil {
		return errs
	}
	p := *s.Path
	if p == "/" || p == "" {
		return errs
	}
	if p == "//" {
		return append(errs, field.Invalid(fldPath.Child("path"), p, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(p, "/") {
		errs = append(errs, field.Invalid(fldPath.Child("path"), p, "must start with a '/'"))
	}
	rest := strings.TrimSuffix(p[1:], "/")
	for i, segment := range strings.Split(rest, "/") {
		if segment == "" {
			errs = append(errs, field.Invalid(fldPath.Child("path"), p, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range utilvalidation.IsDNS1123Subdomain(segment) {
			errs = append(errs, field.Invalid(fldPath.Child("path"), p, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}
