package rest_test

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPatch(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, cms, `{"metadata":{"name":"a"},"data":{"k":"v"}}`)
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)
	cases := []struct {
		name, path, contentType, body string
		code                          int
		reason                        metav1.StatusReason
		message                       string
	}{
		{name: "unsupported type", path: cms + "/nope", contentType: "application/json", body: `{}`,
			code: 415, reason: metav1.StatusReasonUnsupportedMediaType, message: `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml`},
		{name: "strategic merge on a custom resource", path: widgets + "/w", contentType: "application/strategic-merge-patch+json", body: `{}`,
			code: 415, reason: metav1.StatusReasonUnsupportedMediaType, message: `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`},
		{name: "apply without fieldManager", path: cms + "/a", contentType: applyType, body: `{}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch`},
		{name: "force without apply", path: cms + "/a?force=true", contentType: mergeType, body: `{}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for non-apply patch`},
		{name: "malformed patch", path: cms + "/a", contentType: mergeType, body: `{"data":`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `invalid JSON patch`},
		{name: "merge on missing", path: cms + "/nope", contentType: mergeType, body: `{"data":{"k":"x"}}`,
			code: 404, reason: metav1.StatusReasonNotFound, message: `configmaps "nope" not found`},
		{name: "stale resourceVersion in patch", path: cms + "/a", contentType: mergeType, body: `{"metadata":{"resourceVersion":"1"},"data":{"k":"x"}}`,
			code: 409, reason: metav1.StatusReasonConflict, message: `Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`},
		{name: "invalid result", path: widgets + "/w", contentType: mergeType, body: `{"spec":{"size":-1}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `Widget.example.com "w" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.stored(t, "configmaps", "ns", "a").GetResourceVersion()
			wantStatus(t, f.do(t, http.MethodPatch, tc.path, tc.contentType, tc.body), tc.code, tc.reason, tc.message)
			if f.stored(t, "configmaps", "ns", "a").GetResourceVersion() != before || f.stored(t, "configmaps", "ns", "nope") != nil {
				t.Fatal("a refused patch wrote")
			}
		})
	}
	t.Run("merge patch with unknown field warns", func(t *testing.T) {
		r := f.do(t, http.MethodPatch, cms+"/a", mergeType, `{"data":{"k":"m"},"dta":1}`)
		if r.code != http.StatusOK || r.content["data"].(map[string]any)["k"] != "m" {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		if got := r.header.Values("Warning"); len(got) != 1 || got[0] != `299 - "unknown field \"dta\""` {
			t.Fatalf("Warning = %q", got)
		}
	})
	t.Run("apply creates a missing object", func(t *testing.T) {
		r := f.do(t, http.MethodPatch, cms+"/applied?fieldManager=kubectl", applyType, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\ndata:\n  k: v\n")
		if r.code != http.StatusCreated {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		u := r.meta(t)
		if u.GetUID() == "" || u.GetGeneration() != 1 || len(u.GetManagedFields()) != 1 || u.GetManagedFields()[0].Operation != metav1.ManagedFieldsOperationApply {
			t.Fatalf("created %s", r.body)
		}
	})
	t.Run("dry run patch stores nothing", func(t *testing.T) {
		before := f.stored(t, "configmaps", "ns", "a").GetResourceVersion()
		r := f.do(t, http.MethodPatch, cms+"/a?dryRun=All", mergeType, `{"data":{"k":"dry"}}`)
		if r.code != http.StatusOK || r.content["data"].(map[string]any)["k"] != "dry" {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		if f.stored(t, "configmaps", "ns", "a").GetResourceVersion() != before {
			t.Fatal("dry run stored")
		}
	})
	t.Run("status patch changes only status", func(t *testing.T) {
		r := f.do(t, http.MethodPatch, widgets+"/w/status", mergeType, `{"spec":{"size":7},"status":{"phase":"p"}}`)
		if r.code != http.StatusOK || r.content["status"].(map[string]any)["phase"] != "p" || r.content["spec"].(map[string]any)["size"] != int64(1) {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
	})
}

func TestDelete(t *testing.T) {
	f := newWriteFixture(t)
	t.Run("deletes and answers the object", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"a"}}`)
		r := f.do(t, http.MethodDelete, cms+"/a", "", "")
		if r.code != http.StatusOK || r.meta(t).GetName() != "a" || f.stored(t, "configmaps", "ns", "a") != nil {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/a", "", ""), 404, metav1.StatusReasonNotFound, `configmaps "a" not found`)
	})
	t.Run("preconditions", func(t *testing.T) {
		u := f.create(t, cms, `{"metadata":{"name":"p"}}`).meta(t)
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/p", "", `{"preconditions":{"resourceVersion":"1"}}`), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on ConfigMap "p": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (`+u.GetResourceVersion()+`). The object might have been modified`)
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/p", "", `{"preconditions":{"uid":"x"}}`), 409, metav1.StatusReasonConflict,
			`Operation cannot be fulfilled on ConfigMap "p": the UID in the precondition (x) does not match the UID in record (`+string(u.GetUID())+`). The object might have been deleted and then recreated`)
		if f.stored(t, "configmaps", "ns", "p") == nil {
			t.Fatal("deleted despite failed preconditions")
		}
		if r := f.do(t, http.MethodDelete, cms+"/p", "", `{"preconditions":{"uid":"`+string(u.GetUID())+`"}}`); r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
	})
	t.Run("bad options", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"o"}}`)
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/o?dryRun=Some", "", ""), 422, metav1.StatusReasonInvalid,
			`DeleteOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"`)
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/o?propagationPolicy=Sometimes", "", ""), 422, metav1.StatusReasonInvalid,
			`DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes": supported values: "Foreground", "Background", "Orphan", "nil"`)
	})
	t.Run("options in the body are read as kube's serializers read them", func(t *testing.T) {
		// JSON keys match their case exactly, as kube's JSON serializer
		// reads them: a misspelt key is unknown and ignored, so the
		// object goes at once instead of waiting for the orphan
		// finalizer.
		f.create(t, cms, `{"metadata":{"name":"case"}}`)
		if r := f.do(t, http.MethodDelete, cms+"/case", "", `{"PropagationPolicy":"Orphan"}`); r.code != http.StatusOK || f.stored(t, "configmaps", "ns", "case") != nil {
			t.Fatalf("code %d, stored %v", r.code, f.stored(t, "configmaps", "ns", "case"))
		}
		f.create(t, cms, `{"metadata":{"name":"yaml"}}`)
		r := f.do(t, http.MethodDelete, cms+"/yaml", "application/yaml", "kind: DeleteOptions\napiVersion: v1\npropagationPolicy: Orphan\n")
		if fs := r.meta(t).GetFinalizers(); r.code != http.StatusOK || len(fs) != 1 || fs[0] != "orphan" {
			t.Fatalf("YAML options: code %d finalizers %v", r.code, fs)
		}
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/yaml", "", `{"gracePeriodSeconds":"soon"}`), 400, metav1.StatusReasonBadRequest,
			`json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds of type int64`)
		wantStatus(t, f.do(t, http.MethodDelete, cms+"/yaml", "", `{"kind":`), 400, metav1.StatusReasonBadRequest,
			`couldn't get version/kind; json parse error: unexpected end of JSON input`)
	})
	t.Run("dry run keeps the object", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"dry"}}`)
		if r := f.do(t, http.MethodDelete, cms+"/dry?dryRun=All", "", ""); r.code != http.StatusOK || f.stored(t, "configmaps", "ns", "dry") == nil {
			t.Fatalf("code %d, stored %v", r.code, f.stored(t, "configmaps", "ns", "dry"))
		}
	})
	t.Run("finalizers keep the object until emptied", func(t *testing.T) {
		f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"fin","finalizers":["example.com/hold"]}}`)
		r := f.do(t, http.MethodDelete, widgets+"/fin", "", "")
		u := r.meta(t)
		if r.code != http.StatusOK || u.GetDeletionTimestamp() == nil || u.GetDeletionGracePeriodSeconds() == nil || *u.GetDeletionGracePeriodSeconds() != 0 {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		if u.GetGeneration() != 2 {
			t.Fatalf("generation %d, want 2 once deletion starts", u.GetGeneration())
		}
		if f.stored(t, "widgets", "ns", "fin") == nil {
			t.Fatal("object with finalizers deleted")
		}
		r = f.do(t, http.MethodPatch, widgets+"/fin", mergeType, `{"metadata":{"finalizers":null}}`)
		if r.code != http.StatusOK || f.stored(t, "widgets", "ns", "fin") != nil {
			t.Fatalf("code %d, stored after finalizers emptied: %v", r.code, f.stored(t, "widgets", "ns", "fin"))
		}
	})
	t.Run("propagation policies set the garbage collector's finalizers", func(t *testing.T) {
		for policy, finalizer := range map[string]string{"Orphan": "orphan", "Foreground": "foregroundDeletion"} {
			name := "gc-" + strings.ToLower(policy)
			f.create(t, cms, `{"metadata":{"name":"`+name+`"}}`)
			r := f.do(t, http.MethodDelete, cms+"/"+name, "", `{"propagationPolicy":"`+policy+`"}`)
			if fs := r.meta(t).GetFinalizers(); r.code != http.StatusOK || len(fs) != 1 || fs[0] != finalizer {
				t.Fatalf("%s: code %d finalizers %v", policy, r.code, fs)
			}
			if f.stored(t, "configmaps", "ns", name).GetDeletionTimestamp() == nil {
				t.Fatalf("%s: no deletionTimestamp stored", policy)
			}
			// Background takes the finalizer off again and the object goes.
			if r := f.do(t, http.MethodDelete, cms+"/"+name+"?propagationPolicy=Background", "", ""); r.code != http.StatusOK || f.stored(t, "configmaps", "ns", name) != nil {
				t.Fatalf("%s then Background: code %d", policy, r.code)
			}
		}
	})
}

func TestDeleteCollection(t *testing.T) {
	f := newWriteFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		lbl := "keep"
		if n != "c" {
			lbl = "drop"
		}
		f.create(t, cms, `{"metadata":{"name":"`+n+`","labels":{"x":"`+lbl+`"}}}`)
	}
	f.create(t, "/api/v1/namespaces/other/configmaps", `{"metadata":{"name":"a","labels":{"x":"drop"}}}`)
	r := f.do(t, http.MethodDelete, cms+"?labelSelector=x%3Ddrop", "", "")
	if r.code != http.StatusOK || r.content["kind"] != "ConfigMapList" || len(r.content["items"].([]any)) != 2 {
		t.Fatalf("code %d: %s", r.code, r.body)
	}
	for name, want := range map[string]bool{"a": false, "b": false, "c": true} {
		if got := f.stored(t, "configmaps", "ns", name) != nil; got != want {
			t.Errorf("%s stored = %v, want %v", name, got, want)
		}
	}
	if f.stored(t, "configmaps", "other", "a") == nil {
		t.Error("deletecollection reached another namespace")
	}
	wantStatus(t, f.do(t, http.MethodDelete, cms+"?labelSelector=x%3D%3D%3D", "", ""), 400, metav1.StatusReasonBadRequest, `unable to parse requirement: found '=', expected: identifier`)
}
