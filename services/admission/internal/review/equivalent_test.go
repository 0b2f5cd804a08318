package review_test

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/services/admission/internal/review"
	"kplane.dev/services/admission/internal/review/reviewtest"
)

// widgets is a write of a custom resource through v2 whose equivalents
// are v1 and v3.
func widgets() *review.Attributes {
	target := func(v string) review.Target {
		return review.Target{Resource: schema.GroupVersionResource{Group: "example.com", Version: v, Resource: "widgets"}, Kind: schema.GroupVersionKind{Group: "example.com", Version: v, Kind: "Widget"}}
	}
	own := target("v2")
	return review.New(&admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind(own.Kind), Resource: metav1.GroupVersionResource(own.Resource), Operation: admissionv1.Create,
	}, nil, nil, []review.Target{target("v1"), target("v3")}, nil)
}

// TestMatchOrder shows kube's order: the write's own resource against
// every rule before any equivalent, then rule by rule, each against every
// equivalent in turn; Exact never looks at the equivalents.
func TestMatchOrder(t *testing.T) {
	a := widgets()
	// versions[i] is the one version rule i matches.
	match := func(versions ...string) func(int, schema.GroupVersionResource) bool {
		return func(i int, r schema.GroupVersionResource) bool { return r.Version == versions[i] }
	}
	for _, tc := range []struct {
		name       string
		versions   []string
		equivalent bool
		want       string // the version matched; "" for none
	}{
		{"own resource by a later rule wins over an equivalent by an earlier one", []string{"v3", "v2"}, true, "v2"},
		{"the first rule to match an equivalent wins", []string{"v3", "v1"}, true, "v3"},
		{"one rule, the equivalents in their order", []string{"v1"}, true, "v1"},
		{"exact sees no equivalent", []string{"v3", "v1"}, false, ""},
		{"nothing matches", []string{"v9"}, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := a.Match(len(tc.versions), tc.equivalent, match(tc.versions...))
			if tc.want == "" {
				if ok {
					t.Fatalf("matched %v, want no match", got)
				}
				return
			}
			if !ok || got.Resource.Version != tc.want || got.Kind.Version != tc.want {
				t.Fatalf("matched %v (%v), want version %s", got, ok, tc.want)
			}
		})
	}
}

// TestAs shows a write seen as its equivalent: the object converted, the
// kind and resource the equivalent's, the request kind and resource the
// client's, and one conversion however often it is asked for.
func TestAs(t *testing.T) {
	a := reviewtest.CoreEventCreate(t, "prod", "hello")
	if same, err := a.As(a.Own()); err != nil || same != a {
		t.Fatalf("As(own) = %p, %v; want a itself", same, err)
	}
	seen, err := a.As(reviewtest.EventsEvents)
	if err != nil {
		t.Fatal(err)
	}
	r := seen.Request
	if schema.GroupVersionKind(r.Kind) != reviewtest.EventsEvents.Kind || schema.GroupVersionResource(r.Resource) != reviewtest.EventsEvents.Resource {
		t.Errorf("seen as %v %v, want %v", r.Kind, r.Resource, reviewtest.EventsEvents)
	}
	if schema.GroupVersionKind(*r.RequestKind) != reviewtest.CoreEvents.Kind || schema.GroupVersionResource(*r.RequestResource) != reviewtest.CoreEvents.Resource {
		t.Errorf("request kind %v resource %v, want the client's, %v", r.RequestKind, r.RequestResource, reviewtest.CoreEvents)
	}
	if note, _, _ := unstructured.NestedString(seen.Object.Object, "note"); note != "hello" {
		t.Errorf("note %q, want the core message hello; object %v", note, seen.Object.Object)
	}
	if name, _, _ := unstructured.NestedString(seen.Object.Object, "regarding", "name"); name != "cm" {
		t.Errorf("regarding.name %q, want cm", name)
	}
	if a.Request.Kind.Group != "" || a.Object.GetAPIVersion() != "v1" {
		t.Errorf("the write itself changed: %v %s", a.Request.Kind, a.Object.GetAPIVersion())
	}
	again, err := a.As(reviewtest.EventsEvents)
	if err != nil || again != seen {
		t.Errorf("second As converted again (%p, %v), want %p", again, err, seen)
	}
	va, err := seen.Versioned()
	if err != nil {
		t.Fatal(err)
	}
	if va.VersionedKind != reviewtest.EventsEvents.Kind || va.GetKind() != reviewtest.CoreEvents.Kind || va.GetResource() != reviewtest.CoreEvents.Resource {
		t.Errorf("versioned kind %v, attributes %v %v; want the equivalent's kind on the client's write", va.VersionedKind, va.GetKind(), va.GetResource())
	}
}

// TestConvertWithoutConverter shows that a write that cannot be converted
// is kube's internal error, not a silent pass.
func TestConvertWithoutConverter(t *testing.T) {
	a := widgets()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v2", "kind": "Widget"}}
	_, err := a.ConvertTo(obj, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"})
	if !apierrors.IsInternalError(err) {
		t.Fatalf("error %v, want an internal error", err)
	}
}
