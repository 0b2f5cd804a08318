package corev1

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
)

// Limits of the fields of events that carry an eventTime, as kube's.
const (
	ReportingInstanceLengthLimit = 128
	ActionLengthLimit            = 128
	ReasonLengthLimit            = 128
	NoteLengthLimit              = 1024
)

type eventStrategy struct{}

// EventStrategy validates core/v1 Events with kube's legacy rules only,
// for compatibility with the old clients that write them; a PUT may create
// an event, as recorders rely on.
func EventStrategy() resource.Strategy { return eventStrategy{} }

func (eventStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (eventStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (eventStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateEvent(obj.(*v1.Event))
}

func (eventStrategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	return ValidateEvent(obj.(*v1.Event))
}

// AllowCreateOnUpdate lets a PUT create an event.
func (eventStrategy) AllowCreateOnUpdate() bool { return true }

// ValidateEvent is kube's legacy validation, which every event passes
// whatever the API version it is written through: the event's namespace
// agrees with its involved object's, and an event with an eventTime (a
// "new" event) says who reported it, what was done and why.
func ValidateEvent(ev *v1.Event) field.ErrorList {
	var errs field.ErrorList
	involvedNS := field.NewPath("involvedObject", "namespace")
	mismatch := field.Invalid(involvedNS, ev.InvolvedObject.Namespace, "does not match event.namespace")
	if ev.EventTime.IsZero() {
		switch {
		case ev.InvolvedObject.Namespace == "":
			// Old clients wrote events of cluster-scoped objects in
			// "default".
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, mismatch)
			}
		case ev.Namespace != ev.InvolvedObject.Namespace:
			errs = append(errs, mismatch)
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, mismatch)
		}
		errs = append(errs, required(ev.ReportingController, "reportingController")...)
		for _, msg := range validation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath("reportingController"), ev.ReportingController, msg))
		}
		errs = append(errs, required(ev.ReportingInstance, "reportingInstance")...)
		errs = append(errs, atMost(ev.ReportingInstance, "reportingInstance", ReportingInstanceLengthLimit)...)
		errs = append(errs, required(ev.Action, "action")...)
		errs = append(errs, atMost(ev.Action, "action", ActionLengthLimit)...)
		errs = append(errs, required(ev.Reason, "reason")...)
		errs = append(errs, atMost(ev.Reason, "reason", ReasonLengthLimit)...)
		errs = append(errs, atMost(ev.Message, "message", NoteLengthLimit)...)
	}
	for _, msg := range validation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

func required(value, path string) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(field.NewPath(path), "")}
	}
	return nil
}

// atMost reports a value over limit without echoing it, as kube does.
func atMost(value, path string, limit int) field.ErrorList {
	if len(value) > limit {
		return field.ErrorList{field.Invalid(field.NewPath(path), "", fmt.Sprintf("can have at most %v characters", limit))}
	}
	return nil
}
