package events

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/libs/apiserver/resource"
	corevalidation "kplane.dev/services/core/internal/validation/corev1"
)

type strategy struct{}

// Strategy validates events.k8s.io/v1 Events. Kube validates them in
// their core form, so field paths name core's fields (involvedObject,
// message, count): the legacy rules every event passes, and on create the
// strict ones of the new API (eventTime required, type Normal or Warning,
// the deprecated fields unset, a series of at least 2). Updates may change
// the series only. A PUT may create an event.
func Strategy() resource.Strategy { return strategy{} }

func (strategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (strategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

// AllowCreateOnUpdate lets a PUT create an event.
func (strategy) AllowCreateOnUpdate() bool { return true }

func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return ValidateCreate(eventconv.ToCore(obj.(*eventsv1.Event)))
}

func (strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return ValidateUpdate(eventconv.ToCore(obj.(*eventsv1.Event)), eventconv.ToCore(old.(*eventsv1.Event)))
}

// ValidateCreate is kube's validation of an event created through
// events.k8s.io/v1.
func ValidateCreate(ev *corev1.Event) field.ErrorList {
	errs := corevalidation.ValidateEvent(ev)
	errs = append(errs, validateSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	for _, unset := range []struct {
		path string
		set  bool
	}{
		{"firstTimestamp", !ev.FirstTimestamp.IsZero()},
		{"lastTimestamp", !ev.LastTimestamp.IsZero()},
		{"count", ev.Count != 0},
		{"source", ev.Source.Component != "" || ev.Source.Host != ""},
	} {
		if unset.set {
			errs = append(errs, field.Invalid(field.NewPath(unset.path), "", "needs to be unset"))
		}
	}
	return errs
}

// ValidateUpdate is kube's validation of an event updated through
// events.k8s.io/v1: everything but the series is immutable.
func ValidateUpdate(ev, old *corev1.Event) field.ErrorList {
	errs := corevalidation.ValidateEvent(ev)
	if !reflect.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, validateSeries(ev)...)
	}
	for _, f := range []struct {
		path     string
		new, old any
	}{
		{"involvedObject", ev.InvolvedObject, old.InvolvedObject},
		{"reason", ev.Reason, old.Reason},
		{"message", ev.Message, old.Message},
		{"source", ev.Source, old.Source},
		{"firstTimestamp", ev.FirstTimestamp, old.FirstTimestamp},
		{"lastTimestamp", ev.LastTimestamp, old.LastTimestamp},
		{"count", ev.Count, old.Count},
		{"type", ev.Type, old.Type},
		{"eventTime", ev.EventTime, old.EventTime},
		{"action", ev.Action, old.Action},
		{"related", ev.Related, old.Related},
		{"reportingController", ev.ReportingController, old.ReportingController},
		{"reportingInstance", ev.ReportingInstance, old.ReportingInstance},
	} {
		errs = append(errs, apivalidation.ValidateImmutableField(f.new, f.old, field.NewPath(f.path))...)
	}
	return errs
}

func validateSeries(ev *corev1.Event) field.ErrorList {
	if ev.Series == nil {
		return nil
	}
	var errs field.ErrorList
	if ev.Series.Count < 2 {
		errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
	}
	if ev.Series.LastObservedTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
	}
	return errs
}
