package kinds

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/libs/storage"
)

// withFields extends the default attributes (labels, metadata.name and
// metadata.namespace) with a kind's own selectable fields, as kube's
// registries do.
func withFields[T runtime.Object](extra func(T) fields.Set) storage.AttrFunc {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		t, ok := obj.(T)
		if !ok {
			var want T
			return nil, nil, fmt.Errorf("select fields: got %T, want %T", obj, want)
		}
		ls, fs, err := storage.DefaultAttrs(obj)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range extra(t) {
			fs[k] = v
		}
		return ls, fs, nil
	}
}

func namespaceFields(ns *corev1.Namespace) fields.Set {
	return fields.Set{"status.phase": string(ns.Status.Phase)}
}

func secretFields(s *corev1.Secret) fields.Set {
	return fields.Set{"type": string(s.Type)}
}

// eventsEventFields name the fields of coreEventFields after
// events.k8s.io's own field names, as kube's field label conversion of
// events.k8s.io/v1 does; source is not one of them.
func eventsEventFields(ev *eventsv1.Event) fields.Set {
	core := coreEventFields(eventconv.ToCore(ev))
	return fields.Set{
		"regarding.kind":            core["involvedObject.kind"],
		"regarding.namespace":       core["involvedObject.namespace"],
		"regarding.name":            core["involvedObject.name"],
		"regarding.uid":             core["involvedObject.uid"],
		"regarding.apiVersion":      core["involvedObject.apiVersion"],
		"regarding.resourceVersion": core["involvedObject.resourceVersion"],
		"regarding.fieldPath":       core["involvedObject.fieldPath"],
		"reason":                    core["reason"],
		"reportingController":       core["reportingComponent"],
		"type":                      core["type"],
	}
}

// coreEventFields are the selectable fields of a core/v1 Event. An event
// of the new API has no source, so source selects its reporting
// controller.
func coreEventFields(ev *corev1.Event) fields.Set {
	return fields.Set{
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         firstNonEmpty(ev.Source.Component, ev.ReportingController),
		"type":                           ev.Type,
	}
}
