package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/rest"
)

// scaleBody is a Scale a client PUTs.
func scaleBody(name, rv string, replicas string) string {
	return `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"` + name + `","resourceVersion":"` + rv + `"},"spec":{"replicas":` + replicas + `}}`
}

func TestScaleReadsAndWritesTheDeclaredFields(t *testing.T) {
	f := newWriteFixture(t)
	w := f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1,"replicas":2}}`).meta(t)
	if _, err := f.stores["widgets"].GuaranteedUpdate(context.Background(), f.keys["widgets"].Object("ns", "w"), nil, func(existing runtime.Object) (runtime.Object, error) {
		u := existing.(*unstructured.Unstructured)
		u.Object["status"] = map[string]any{"replicas": int64(1), "selector": "app=w"}
		return u, nil
	}); err != nil {
		t.Fatal(err)
	}
	stored := f.stored(t, "widgets", "ns", "w")

	got := f.do(t, http.MethodGet, widgets+"/w/scale", "", "")
	want := map[string]any{
		"apiVersion": "autoscaling/v1",
		"kind":       "Scale",
		"metadata": map[string]any{
			"name": "w", "namespace": "ns", "uid": string(w.GetUID()),
			"resourceVersion":   stored.GetResourceVersion(),
			"creationTimestamp": w.Object["metadata"].(map[string]any)["creationTimestamp"],
		},
		"spec":   map[string]any{"replicas": int64(2)},
		"status": map[string]any{"replicas": int64(1), "selector": "app=w"},
	}
	if got.code != http.StatusOK || !reflect.DeepEqual(got.content, want) {
		t.Fatalf("GET scale: %d %s\nwant %v", got.code, got.body, want)
	}

	dry := f.do(t, http.MethodPut, widgets+"/w/scale?dryRun=All", "", scaleBody("w", stored.GetResourceVersion(), "8"))
	if dry.code != http.StatusOK || dry.content["spec"].(map[string]any)["replicas"] != int64(8) ||
		f.stored(t, "widgets", "ns", "w").GetResourceVersion() != stored.GetResourceVersion() {
		t.Fatalf("dry-run PUT scale: %d %s, or it was stored", dry.code, dry.body)
	}
	put := f.do(t, http.MethodPut, widgets+"/w/scale", "", scaleBody("w", stored.GetResourceVersion(), "5"))
	after := f.stored(t, "widgets", "ns", "w")
	if put.code != http.StatusOK || put.content["spec"].(map[string]any)["replicas"] != int64(5) ||
		put.content["metadata"].(map[string]any)["resourceVersion"] != after.GetResourceVersion() {
		t.Fatalf("PUT scale: %d %s", put.code, put.body)
	}
	// Only the spec replicas change; status stays, and generation moves
	// as for any change of spec.
	if r, _, _ := unstructured.NestedInt64(after.Object, "spec", "replicas"); r != 5 {
		t.Fatalf("stored spec.replicas %d, want 5", r)
	}
	if !reflect.DeepEqual(after.Object["status"], stored.Object["status"]) || after.Object["spec"].(map[string]any)["size"] != int64(1) || after.GetGeneration() != stored.GetGeneration()+1 {
		t.Fatalf("a scale update changed more than spec.replicas: %v", after.Object)
	}

	// A PUT sets the replicas of an object that has none, as kube.
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"bare"},"spec":{"size":1}}`)
	if r := f.do(t, http.MethodPut, widgets+"/bare/scale", "", scaleBody("bare", "", "3")); r.code != http.StatusOK {
		t.Fatalf("PUT scale of an object without replicas: %d %s", r.code, r.body)
	}
	if r, _, _ := unstructured.NestedInt64(f.stored(t, "widgets", "ns", "bare").Object, "spec", "replicas"); r != 3 {
		t.Fatalf("stored spec.replicas %d, want 3", r)
	}
}

// TestScaleTable checks the table kubectl get --subresource=scale shows,
// as kube's for a custom resource.
func TestScaleTable(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":2}}`)
	req, err := http.NewRequest(http.MethodGet, f.url+widgets+"/w/scale", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range table.ColumnDefinitions {
		names = append(names, c.Name)
	}
	if resp.StatusCode != http.StatusOK || strings.Join(names, ",") != "Name,Desired,Available,Age" || len(table.Rows) != 1 ||
		fmt.Sprint(table.Rows[0].Cells[:3]) != "[w 2 0]" {
		t.Fatalf("scale table: %d columns %v rows %+v", resp.StatusCode, names, table.Rows)
	}
}

func TestScaleErrors(t *testing.T) {
	f := newWriteFixture(t)
	w := f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":2}}`).meta(t)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"bare"},"spec":{"size":1}}`)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"bad"},"spec":{"replicas":1}}`)
	// Validation keeps a non-integer out of the replicas field; storage
	// written otherwise (before the resource had a scale) may still hold one.
	if _, err := f.stores["widgets"].GuaranteedUpdate(context.Background(), f.keys["widgets"].Object("ns", "bad"), nil, func(existing runtime.Object) (runtime.Object, error) {
		u := existing.(*unstructured.Unstructured)
		return u, unstructured.SetNestedField(u.Object, "many", "spec", "replicas")
	}); err != nil {
		t.Fatal(err)
	}
	stale := w.GetResourceVersion()
	if r := f.do(t, http.MethodPatch, widgets+"/w", mergeType, `{"spec":{"size":4}}`); r.code != http.StatusOK {
		t.Fatalf("patch: %d %s", r.code, r.body)
	}
	const accessor = `.spec.replicas accessor error: many is of the type string, expected int64`
	cases := []struct {
		name, method, path, contentType, body string
		code                                  int
		reason                                metav1.StatusReason
		message                               string
	}{
		{"get missing", http.MethodGet, "/nope/scale", "", "", http.StatusNotFound, metav1.StatusReasonNotFound, `widgets.example.com "nope" not found`},
		{"put missing", http.MethodPut, "/nope/scale", "", scaleBody("nope", "", "1"), http.StatusNotFound, metav1.StatusReasonNotFound, `widgets.example.com "nope" not found`},
		{"patch missing", http.MethodPatch, "/nope/scale", mergeType, `{"spec":{"replicas":1}}`, http.StatusNotFound, metav1.StatusReasonNotFound, `widgets.example.com "nope" not found`},
		{"stale resourceVersion", http.MethodPut, "/w/scale", "", scaleBody("w", stale, "3"), http.StatusConflict, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on widgets.example.com "w": the object has been modified; please apply your changes to the latest version and try again`},
		{"negative replicas", http.MethodPut, "/w/scale", "", scaleBody("w", "", "-1"), http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`Widget.example.com "w" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer`},
		{"negative replicas patch", http.MethodPatch, "/w/scale", mergeType, `{"spec":{"replicas":-3}}`, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			`Widget.example.com "w" is invalid: .spec.replicas: Invalid value: -3: should be a non-negative integer`},
		{"non-integer replicas", http.MethodPut, "/w/scale", "", scaleBody("w", "", `"two"`), http.StatusBadRequest, metav1.StatusReasonBadRequest,
			`Scale in version "v1" cannot be handled as a Scale: json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32`},
		{"fractional replicas patch", http.MethodPatch, "/w/scale", mergeType, `{"spec":{"replicas":1.5}}`, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
			` "" is invalid: patch: Invalid value: "{\"apiVersion\":\"autoscaling/v1\",\"kind\":\"Scale\"`},
		{"name mismatch", http.MethodPut, "/w/scale", "", scaleBody("v", "", "1"), http.StatusBadRequest, metav1.StatusReasonBadRequest,
			`the name of the object (v) does not match the name on the URL (w)`},
		{"wrong kind", http.MethodPut, "/w/scale", "", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":1}}`, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			`Widget in version "v1" cannot be handled as a Scale: no kind "Widget" is registered for version "example.com/v1"`},
		{"no spec replicas", http.MethodGet, "/bare/scale", "", "", http.StatusInternalServerError, metav1.StatusReasonInternalError,
			`Internal error occurred: the spec replicas field ".spec.replicas" does not exist`},
		{"patch leaving no spec replicas", http.MethodPatch, "/bare/scale", mergeType, `{"metadata":{"labels":{"a":"b"}}}`, http.StatusBadRequest, metav1.StatusReasonBadRequest,
			`the spec replicas field ".spec.replicas" cannot be empty`},
		{"get non-integer spec replicas", http.MethodGet, "/bad/scale", "", "", http.StatusInternalServerError, "", accessor},
		{"put non-integer spec replicas", http.MethodPut, "/bad/scale", "", scaleBody("bad", "", "1"), http.StatusInternalServerError, "", accessor},
		{"strategic merge patch", http.MethodPatch, "/w/scale", "application/strategic-merge-patch+json", `{"spec":{"replicas":1}}`, http.StatusUnsupportedMediaType, metav1.StatusReasonUnsupportedMediaType,
			`the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`},
		{"delete", http.MethodDelete, "/w/scale", "", "", http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, `delete is not supported on resources of kind "widgets.example.com"`},
		{"create", http.MethodPost, "/w/scale", "", scaleBody("w", "", "1"), http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, `create is not supported on resources of kind "widgets.example.com"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.stored(t, "widgets", "ns", "w")
			r := f.do(t, tc.method, widgets+tc.path, tc.contentType, tc.body)
			if tc.name == "fractional replicas patch" || tc.name == "wrong kind" {
				// The message goes on with the patched document or the
				// scheme's location; its start is kube's.
				if r.code != tc.code || r.status.Reason != tc.reason || len(r.status.Message) < len(tc.message) || r.status.Message[:len(tc.message)] != tc.message {
					t.Fatalf("got %d %s %q", r.code, r.status.Reason, r.status.Message)
				}
			} else {
				wantStatus(t, r, tc.code, tc.reason, tc.message)
			}
			if after := f.stored(t, "widgets", "ns", "w"); after.GetResourceVersion() != before.GetResourceVersion() {
				t.Fatalf("a refused scale write changed the object")
			}
		})
	}
}

func TestScaleFieldsAreValidated(t *testing.T) {
	f := newWriteFixture(t)
	r := f.do(t, http.MethodPost, widgets, "", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":"x"}}`)
	wantStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`Widget.example.com "w" is invalid: .spec.replicas: Invalid value: 0: .spec.replicas accessor error: x is of the type string, expected int64`)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":1}}`)
	r = f.do(t, http.MethodPatch, widgets+"/w/status", mergeType, `{"status":{"replicas":-1,"selector":3}}`)
	wantStatus(t, r, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
		`Widget.example.com "w" is invalid: [.status.replicas: Invalid value: -1: should be a non-negative integer, .status.selector: Invalid value: "": .status.selector accessor error: 3 is of the type int64, expected string]`)
}

func TestScaleAdmissionSeesScales(t *testing.T) {
	log := &admissionLog{}
	var asked int32
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	f := newWriteFixture(t,
		rest.WithAdmission(mutator{log: log, fn: func(a *rest.Attributes) error {
			if s, ok := a.Object.(*autoscalingv1.Scale); ok {
				asked = s.Spec.Replicas
				s.Spec.Replicas = 9
			}
			return nil
		}}),
		rest.WithAdmission(validator{log: log}))
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":2}}`)
	log.take()
	r := f.do(t, http.MethodPut, widgets+"/w/scale", "", scaleBody("w", "", "4"))
	if r.code != http.StatusOK || r.content["spec"].(map[string]any)["replicas"] != int64(9) {
		t.Fatalf("PUT scale: %d %s", r.code, r.body)
	}
	calls, attrs := log.take()
	if len(calls) != 2 || calls[0] != "mutate UPDATE widgets/scale" || calls[1] != "validate UPDATE widgets/scale" {
		t.Fatalf("admission calls %q", calls)
	}
	if asked != 4 {
		t.Fatalf("mutating admission saw %d replicas, the client asked for 4", asked)
	}
	scaleGVK := autoscalingv1.SchemeGroupVersion.WithKind("Scale")
	// The mutating plugin changed the Scale both records hold.
	for i, want := range []struct{ obj, old int32 }{{9, 2}, {9, 2}} {
		a := attrs[i]
		obj, ok1 := a.Object.(*autoscalingv1.Scale)
		old, ok2 := a.OldObject.(*autoscalingv1.Scale)
		if a.Kind != scaleGVK || a.Resource.GroupResource() != gr || !ok1 || !ok2 || obj.Spec.Replicas != want.obj || old.Spec.Replicas != want.old {
			t.Fatalf("%s saw kind %v resource %v objects %#v, %#v; want Scales of %d and %d replicas", calls[i], a.Kind, a.Resource, a.Object, a.OldObject, want.obj, want.old)
		}
	}
}
