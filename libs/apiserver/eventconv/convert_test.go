package eventconv

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFromCoreAndBack converts a core Event with every field set to
// events.k8s.io and back: each core field lands in its events.k8s.io
// counterpart, nothing is lost, and nothing is shared with the input.
func TestFromCoreAndBack(t *testing.T) {
	first := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	last := first.Add(2 * time.Minute)
	core := &corev1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: "ev", Namespace: "team", Labels: map[string]string{"k": "v"}},
		InvolvedObject:      corev1.ObjectReference{Kind: "ConfigMap", Namespace: "team", Name: "cm", APIVersion: "v1"},
		Reason:              "Changed",
		Message:             "the map changed",
		Source:              corev1.EventSource{Component: "ctl", Host: "h"},
		FirstTimestamp:      metav1.NewTime(first),
		LastTimestamp:       metav1.NewTime(last),
		Count:               2,
		Type:                corev1.EventTypeNormal,
		EventTime:           metav1.NewMicroTime(first),
		Series:              &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(last)},
		Action:              "Update",
		Related:             &corev1.ObjectReference{Kind: "Secret", Name: "s"},
		ReportingController: "example.com/ctl",
		ReportingInstance:   "ctl-0",
	}
	ev := FromCore(core)
	want := &eventsv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta:               core.ObjectMeta,
		EventTime:                core.EventTime,
		Series:                   &eventsv1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(last)},
		ReportingController:      "example.com/ctl",
		ReportingInstance:        "ctl-0",
		Action:                   "Update",
		Reason:                   "Changed",
		Regarding:                core.InvolvedObject,
		Related:                  core.Related,
		Note:                     "the map changed",
		Type:                     corev1.EventTypeNormal,
		DeprecatedSource:         core.Source,
		DeprecatedFirstTimestamp: core.FirstTimestamp,
		DeprecatedLastTimestamp:  core.LastTimestamp,
		DeprecatedCount:          2,
	}
	if !equality.Semantic.DeepEqual(ev, want) {
		t.Fatalf("FromCore:\n got %+v\nwant %+v", ev, want)
	}
	if back := ToCore(ev); !equality.Semantic.DeepEqual(back, core) {
		t.Fatalf("round trip through events.k8s.io:\n got %+v\nwant %+v", back, core)
	}
	ev.Labels["k"], ev.Related.Name = "changed", "changed"
	if core.Labels["k"] != "v" || core.Related.Name != "s" {
		t.Fatal("FromCore shares memory with its input")
	}
	if back := FromCore(ToCore(&eventsv1.Event{})); back.Series != nil || back.Related != nil || !back.EventTime.IsZero() {
		t.Fatalf("empty event did not round trip: %+v", back)
	}
}
