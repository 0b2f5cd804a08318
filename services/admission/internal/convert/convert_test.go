package convert

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/proto/admission"
)

func events(t *testing.T) *admission.Review {
	t.Helper()
	return &admission.Review{
		Request:     admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Event"}},
		Equivalents: []admission.Equivalent{{Resource: metav1.GroupVersionResource{Group: "events.k8s.io", Version: "v1", Resource: "events"}, Kind: metav1.GroupVersionKind(eventsEvent)}},
	}
}

func TestEvents(t *testing.T) {
	cs, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cs.For(events(t))
	if err != nil {
		t.Fatal(err)
	}
	core := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Event",
		"metadata":       map[string]any{"name": "e", "namespace": "prod", "labels": map[string]any{"a": "b"}},
		"involvedObject": map[string]any{"kind": "ConfigMap", "name": "cm"},
		"message":        "hello",
		"count":          int64(3),
	}}
	ev, err := c.Convert(core, eventsEvent)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]any{"note": "hello", "regarding.name": "cm", "deprecatedCount": int64(3), "metadata.labels.a": "b", "apiVersion": "events.k8s.io/v1"} {
		if got, _, _ := unstructured.NestedFieldNoCopy(ev.Object, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %v, want %v", path, got, want)
		}
	}
	back, err := c.Convert(ev, coreEvent)
	if err != nil {
		t.Fatal(err)
	}
	if msg, _, _ := unstructured.NestedString(back.Object, "message"); msg != "hello" || back.GetAPIVersion() != "v1" {
		t.Errorf("back in core: %v", back.Object)
	}
	if _, err := c.Convert(core, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}); err == nil {
		t.Error("converted an event to a Deployment")
	}
}

func widgetCRD(generation int64) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "crd-uid", Generation: generation},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget", ListKind: "WidgetList", Singular: "widget"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true}, {Name: "v2", Served: true},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
	}
}

// TestCustomResources converts with the CRD's strategy (None: the
// apiVersion alone changes) and builds a CRD's converter once per
// generation.
func TestCustomResources(t *testing.T) {
	cs, err := New(nil)
	if err != nil {
		t.Fatal(err)
	}
	review := func(generation int64) *admission.Review {
		return &admission.Review{
			Equivalents: []admission.Equivalent{{Kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}}},
			Definition:  widgetCRD(generation),
		}
	}
	c, err := cs.For(review(1))
	if err != nil {
		t.Fatal(err)
	}
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v2", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "prod"},
		"spec":     map[string]any{"size": int64(3)},
	}}
	v1, err := c.Convert(w, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	if err != nil {
		t.Fatal(err)
	}
	if v1.GetAPIVersion() != "example.com/v1" || v1.Object["spec"].(map[string]any)["size"] != int64(3) {
		t.Errorf("converted %v", v1.Object)
	}
	if w.GetAPIVersion() != "example.com/v2" {
		t.Error("the conversion changed its input")
	}
	first := cs.byCRD["crd-uid"].convertor
	if _, err := cs.For(review(1)); err != nil || cs.byCRD["crd-uid"].convertor != first {
		t.Errorf("the same generation built a new converter (%v)", err)
	}
	if _, err := cs.For(review(2)); err != nil || cs.byCRD["crd-uid"].convertor == first {
		t.Errorf("a new generation kept the old converter (%v)", err)
	}
	noConversion := review(3)
	noConversion.Definition.Spec.Conversion = nil
	if c, err := cs.For(noConversion); err != nil {
		t.Errorf("a CRD without conversion: %v", err)
	} else if _, err := c.Convert(w, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}); err != nil {
		t.Errorf("a CRD without conversion does not convert as None: %v", err)
	}
	if c, err := cs.For(&admission.Review{}); c != nil || err != nil {
		t.Errorf("a review without equivalents has converter %v, %v; want none", c, err)
	}
}
