// Package reviewtest builds writes with equivalent resources for the
// tests of the admission steps: events, served as core/v1 and as
// events.k8s.io/v1, converted as the admission service converts them.
package reviewtest

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/proto/admission"
	"kplane.dev/services/admission/internal/convert"
	"kplane.dev/services/admission/internal/review"
)

// The two resources that serve events.
var (
	CoreEvents   = review.Target{Resource: schema.GroupVersionResource{Version: "v1", Resource: "events"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Event"}}
	EventsEvents = review.Target{Resource: schema.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, Kind: schema.GroupVersionKind{Group: "events.k8s.io", Version: "v1", Kind: "Event"}}
)

// CoreEventCreate is the create, through core/v1, of event e in namespace
// with message: events.k8s.io/v1 calls the message note.
func CoreEventCreate(t testing.TB, namespace, message string) *review.Attributes {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"name": "e", "namespace": namespace},
		"involvedObject": map[string]any{"kind": "ConfigMap", "namespace": namespace, "name": "cm", "apiVersion": "v1"},
		"reason":         "Changed",
		"message":        message,
		"type":           "Normal",
	}}
	kind, resource := metav1.GroupVersionKind(CoreEvents.Kind), metav1.GroupVersionResource(CoreEvents.Resource)
	r := &admission.Review{
		Request: admissionv1.AdmissionRequest{
			UID: "event-uid", Kind: kind, Resource: resource, RequestKind: &kind, RequestResource: &resource,
			Name: "e", Namespace: namespace, Operation: admissionv1.Create,
			UserInfo: authenticationv1.UserInfo{Username: "alice"},
		},
		Equivalents: []admission.Equivalent{{Resource: metav1.GroupVersionResource(EventsEvents.Resource), Kind: metav1.GroupVersionKind(EventsEvents.Kind)}},
	}
	converters, err := convert.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := converters.For(r)
	if err != nil {
		t.Fatal(err)
	}
	return review.New(&r.Request, obj, nil, []review.Target{EventsEvents}, c)
}
