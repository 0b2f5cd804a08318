package events

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func check(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	got := make([]string, 0, len(errs))
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("errors:\n got %q\nwant %q", got, want)
	}
}

var (
	t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 = t0.Add(time.Minute)
)

// full sets every field of an events.k8s.io Event.
func full() *eventsv1.Event {
	return &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               metav1.ObjectMeta{Name: "e", Namespace: "ns", ResourceVersion: "7", Labels: map[string]string{"a": "b"}},
		EventTime:                metav1.NewMicroTime(t0),
		Series:                   &eventsv1.EventSeries{Count: 3, LastObservedTime: metav1.NewMicroTime(t1)},
		ReportingController:      "example.com/ctl",
		ReportingInstance:        "ctl-1",
		Action:                   "Act",
		Reason:                   "Why",
		Regarding:                corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "p", UID: "u", APIVersion: "v1", ResourceVersion: "3", FieldPath: "spec.containers{c}"},
		Related:                  &corev1.ObjectReference{Kind: "Node", Name: "n"},
		Note:                     "something happened",
		Type:                     corev1.EventTypeWarning,
		DeprecatedSource:         corev1.EventSource{Component: "kubelet", Host: "n"},
		DeprecatedFirstTimestamp: metav1.NewTime(t0),
		DeprecatedLastTimestamp:  metav1.NewTime(t1),
		DeprecatedCount:          4,
	}
}

func TestValidateCreate(t *testing.T) {
	valid := func(mutate func(*eventsv1.Event)) *eventsv1.Event {
		ev := full()
		ev.Series = nil
		ev.DeprecatedSource, ev.DeprecatedFirstTimestamp, ev.DeprecatedLastTimestamp, ev.DeprecatedCount = corev1.EventSource{}, metav1.Time{}, metav1.Time{}, 0
		mutate(ev)
		return ev
	}
	for _, tc := range []struct {
		name string
		ev   *eventsv1.Event
		want []string
	}{
		{"valid", valid(func(*eventsv1.Event) {}), nil},
		{"valid series", valid(func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(t1)}
		}), nil},
		{"bad series", valid(func(e *eventsv1.Event) { e.Series = &eventsv1.EventSeries{Count: 1} }), []string{
			`series.count: Invalid value: "": should be at least 2`,
			`series.lastObservedTime: Required value`,
		}},
		{"no event time", valid(func(e *eventsv1.Event) { e.EventTime = metav1.MicroTime{} }), []string{`eventTime: Required value`}},
		{"bad type", valid(func(e *eventsv1.Event) { e.Type = "Bad" }), []string{`type: Invalid value: "": has invalid value: Bad`}},
		{"deprecated fields set", valid(func(e *eventsv1.Event) {
			e.DeprecatedSource.Host, e.DeprecatedFirstTimestamp, e.DeprecatedLastTimestamp, e.DeprecatedCount = "h", metav1.NewTime(t0), metav1.NewTime(t1), 1
		}), []string{
			`firstTimestamp: Invalid value: "": needs to be unset`,
			`lastTimestamp: Invalid value: "": needs to be unset`,
			`count: Invalid value: "": needs to be unset`,
			`source: Invalid value: "": needs to be unset`,
		}},
		{"legacy rules apply", valid(func(e *eventsv1.Event) { e.Regarding.Namespace, e.ReportingInstance = "", "" }), []string{
			`involvedObject.namespace: Invalid value: "": does not match event.namespace`,
			`reportingInstance: Required value`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			check(t, Strategy().Validate(context.Background(), tc.ev), tc.want)
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	old := full()
	old.DeprecatedSource, old.DeprecatedFirstTimestamp, old.DeprecatedLastTimestamp, old.DeprecatedCount = corev1.EventSource{}, metav1.Time{}, metav1.Time{}, 0
	for _, tc := range []struct {
		name   string
		mutate func(*eventsv1.Event)
		want   []string
	}{
		{"unchanged", func(*eventsv1.Event) {}, nil},
		{"series moves on", func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 9, LastObservedTime: metav1.NewMicroTime(t1.Add(time.Hour))}
		}, nil},
		{"series made invalid", func(e *eventsv1.Event) {
			e.Series = &eventsv1.EventSeries{Count: 1, LastObservedTime: metav1.NewMicroTime(t1)}
		}, []string{`series.count: Invalid value: "": should be at least 2`}},
		{"labels change", func(e *eventsv1.Event) { e.Labels = map[string]string{"x": "y"} }, nil},
		{"note changes", func(e *eventsv1.Event) { e.Note = "other" }, []string{`message: Invalid value: "other": field is immutable`}},
		{"everything else changes", func(e *eventsv1.Event) {
			e.Regarding.Name, e.Reason, e.DeprecatedCount, e.Type, e.Action, e.Related, e.ReportingController, e.ReportingInstance = "q", "R", 2, corev1.EventTypeNormal, "B", nil, "c.io/x", "i2"
			e.EventTime = metav1.NewMicroTime(t1)
			e.DeprecatedSource.Component = "s"
			e.DeprecatedFirstTimestamp, e.DeprecatedLastTimestamp = metav1.NewTime(t0), metav1.NewTime(t1)
		}, []string{
			`involvedObject: Invalid value: {"kind":"Pod","namespace":"ns","name":"q","uid":"u","apiVersion":"v1","resourceVersion":"3","fieldPath":"spec.containers{c}"}: field is immutable`,
			`reason: Invalid value: "R": field is immutable`,
			`source: Invalid value: {"component":"s"}: field is immutable`,
			`firstTimestamp: Invalid value: "2026-01-02T03:04:05Z": field is immutable`,
			`lastTimestamp: Invalid value: "2026-01-02T03:05:05Z": field is immutable`,
			`count: Invalid value: 2: field is immutable`,
			`type: Invalid value: "Normal": field is immutable`,
			`eventTime: Invalid value: "2026-01-02T03:05:05.000000Z": field is immutable`,
			`action: Invalid value: "B": field is immutable`,
			`related: Invalid value: null: field is immutable`,
			`reportingController: Invalid value: "c.io/x": field is immutable`,
			`reportingInstance: Invalid value: "i2": field is immutable`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := old.DeepCopy()
			tc.mutate(ev)
			check(t, Strategy().ValidateUpdate(context.Background(), ev, old), tc.want)
		})
	}
}
