package apiregistration

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/utils/ptr"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// APIServiceStrategy returns the rules of APIServices. Status is written
// through /status, whose updates leave the spec as stored; both kinds of
// update are checked here.
func APIServiceStrategy() resource.Strategy { return strategy{} }

var _ rest.NameValidator = strategy{}

type strategy struct{}

// ValidateName checks what can be checked without the spec; Validate
// checks that the name is the spec's "<version>.<group>".
func (strategy) ValidateName(name string, _ bool) []string {
	return path.IsValidPathSegmentName(name)
}

// PrepareForCreate applies the v1 default port and marks a local
// APIService available from its creation on.
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	s, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return
	}
	defaultPort(s)
	if s.Spec.Service == nil {
		s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{
			Type:               apiregistrationv1.Available,
			Status:             apiregistrationv1.ConditionTrue,
			LastTransitionTime: s.CreationTimestamp,
			Reason:             "Local",
			Message:            "Local APIServices are always available",
		}}
	}
}

func (strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	if s, ok := obj.(*apiregistrationv1.APIService); ok {
		defaultPort(s)
	}
}

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	s, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return wrongType(obj)
	}
	return validateSpec(s)
}

func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	s, ok := obj.(*apiregistrationv1.APIService)
	if !ok {
		return wrongType(obj)
	}
	return append(validateSpec(s), validateStatus(&s.Status)...)
}

func defaultPort(s *apiregistrationv1.APIService) {
	if s.Spec.Service != nil && s.Spec.Service.Port == nil {
		s.Spec.Service.Port = ptr.To[int32](443)
	}
}

// wrongType is the error for an object the strategy was not built for,
// a wiring mistake that must not pass as valid.
func wrongType(obj runtime.Object) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("got %T, want *apiregistrationv1.APIService", obj))}
}

func validateSpec(s *apiregistrationv1.APIService) field.ErrorList {
	var errs field.ErrorList
	spec := &s.Spec
	specPath := field.NewPath("spec")
	// A name that is no path segment is reported by the REST layer
	// through ValidateName, with no mismatch on top, as kube does.
	required := spec.Version + "." + spec.Group
	if len(path.IsValidPathSegmentName(s.Name)) == 0 && s.Name != required {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), s.Name, fmt.Sprintf("must be `spec.version+\".\"+spec.group`: %q", required)))
	}
	// Only the legacy core API, served locally, has no group.
	if spec.Group == "" && spec.Version != "v1" {
		errs = append(errs, field.Required(specPath.Child("group"), "only v1 may have an empty group and it better be legacy kube"))
	}
	if spec.Group != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(spec.Group) {
			errs = append(errs, field.Invalid(specPath.Child("group"), spec.Group, msg))
		}
	}
	for _, msg := range utilvalidation.IsDNS1035Label(spec.Version) {
		errs = append(errs, field.Invalid(specPath.Child("version"), spec.Version, msg))
	}
	if spec.GroupPriorityMinimum <= 0 || spec.GroupPriorityMinimum > 20000 {
		errs = append(errs, field.Invalid(specPath.Child("groupPriorityMinimum"), spec.GroupPriorityMinimum, "must be positive and less than 20000"))
	}
	if spec.VersionPriority <= 0 || spec.VersionPriority > 1000 {
		errs = append(errs, field.Invalid(specPath.Child("versionPriority"), spec.VersionPriority, "must be positive and less than 1000"))
	}
	if spec.Service == nil {
		if len(spec.CABundle) != 0 {
			errs = append(errs, field.Invalid(specPath.Child("caBundle"), fmt.Sprintf("%d bytes", len(spec.CABundle)), "local APIServices may not have a caBundle"))
		}
		if spec.InsecureSkipTLSVerify {
			errs = append(errs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), spec.InsecureSkipTLSVerify, "local APIServices may not have insecureSkipTLSVerify"))
		}
		return errs
	}
	svcPath := specPath.Child("service")
	if spec.Service.Namespace == "" {
		errs = append(errs, field.Required(svcPath.Child("namespace"), ""))
	}
	if spec.Service.Name == "" {
		errs = append(errs, field.Required(svcPath.Child("name"), ""))
	}
	port := ptr.Deref(spec.Service.Port, 443)
	if msgs := utilvalidation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(svcPath.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if spec.InsecureSkipTLSVerify && len(spec.CABundle) > 0 {
		errs = append(errs, field.Invalid(specPath.Child("insecureSkipTLSVerify"), spec.InsecureSkipTLSVerify, "may not be true if caBundle is present"))
	}
	return errs
}

func validateStatus(s *apiregistrationv1.APIServiceStatus) field.ErrorList {
	var errs field.ErrorList
	statuses := []string{string(apiregistrationv1.ConditionTrue), string(apiregistrationv1.ConditionFalse), string(apiregistrationv1.ConditionUnknown)}
	for i, c := range s.Conditions {
		switch c.Status {
		case apiregistrationv1.ConditionTrue, apiregistrationv1.ConditionFalse, apiregistrationv1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(field.NewPath("status", "conditions").Index(i).Child("status"), c.Status, statuses))
		}
	}
	return errs
}
