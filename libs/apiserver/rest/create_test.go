package rest_test

import (
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	cms     = "/api/v1/namespaces/ns/configmaps"
	widgets = "/apis/example.com/v1/namespaces/ns/widgets"
)

const dnsMessage = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`

func TestCreateRefusals(t *testing.T) {
	f := newWriteFixture(t)
	if r := f.do(t, http.MethodPost, cms, "", `{"metadata":{"name":"taken"}}`); r.code != http.StatusCreated {
		t.Fatalf("setup: %d %s", r.code, r.body)
	}
	cases := []struct {
		name, path, query, contentType, body string
		code                                 int
		reason                               metav1.StatusReason
		message                              string
	}{
		{name: "already exists", path: cms, body: `{"metadata":{"name":"taken"}}`,
			code: 409, reason: metav1.StatusReasonAlreadyExists, message: `configmaps "taken" already exists`},
		{name: "uppercase name", path: cms, body: `{"metadata":{"name":"X"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `ConfigMap "X" is invalid: metadata.name: Invalid value: "X": ` + dnsMessage},
		{name: "no name", path: cms, body: `{"metadata":{}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required`},
		{name: "malformed json", path: cms, body: `{"metadata":`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({"metadata":)`},
		{name: "wrong api version", path: widgets, body: `{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"a"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the API version in the data (example.com/v2) does not match the expected API version (example.com/v1)`},
		{name: "namespace mismatch", path: cms, body: `{"metadata":{"name":"a","namespace":"other"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the namespace of the provided object does not match the namespace sent on the request`},
		{name: "unsupported media type", path: cms, contentType: "text/plain", body: `{}`,
			code: 415, reason: metav1.StatusReasonUnsupportedMediaType, message: `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf`},
		{name: "strict unknown field", path: cms, query: "?fieldValidation=Strict", body: `{"metadata":{"name":"a"},"dta":{}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "dta"`},
		{name: "strict duplicate field", path: widgets, query: "?fieldValidation=Strict", body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"x":1,"x":2}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `Widget in version "v1" cannot be handled as a Widget: strict decoding error: duplicate field "spec.x"`},
		{name: "bad dryRun", path: cms, query: "?dryRun=Some", body: `{"metadata":{"name":"a"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Some"]: supported values: "All"`},
		{name: "bad fieldValidation", path: cms, query: "?fieldValidation=Loud", body: `{"metadata":{"name":"a"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"`},
		{name: "resourceVersion set", path: cms, body: `{"metadata":{"name":"a","resourceVersion":"5"}}`,
			code: 500, reason: metav1.StatusReasonInternalError, message: `Internal error occurred: resourceVersion should not be set on objects to be created`},
		{name: "strategy validation", path: widgets, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"size":-1}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `Widget.example.com "a" is invalid: spec.size: Invalid value: -1: must be greater than or equal to 0`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, http.MethodPost, tc.path+tc.query, tc.contentType, tc.body)
			wantStatus(t, r, tc.code, tc.reason, tc.message)
			if f.stored(t, "configmaps", "ns", "a") != nil || f.stored(t, "widgets", "ns", "a") != nil {
				t.Fatal("a refused create stored an object")
			}
		})
	}
}

func TestCreate(t *testing.T) {
	f := newWriteFixture(t)
	cases := []struct {
		name, path, query, contentType, body string
		check                                func(t *testing.T, r response)
	}{
		{name: "system metadata", path: cms, query: "?fieldManager=kubectl-create", body: `{"metadata":{"name":"a","uid":"mine","creationTimestamp":"2001-01-01T00:00:00Z"},"data":{"k":"v"}}`,
			check: func(t *testing.T, r response) {
				u := r.meta(t)
				if u.GetUID() == "" || u.GetUID() == "mine" || u.GetResourceVersion() == "" || u.GetGeneration() != 1 {
					t.Fatalf("uid %q rv %q generation %d", u.GetUID(), u.GetResourceVersion(), u.GetGeneration())
				}
				if u.GetCreationTimestamp().Year() == 2001 {
					t.Fatal("client's creationTimestamp kept")
				}
				if mf := u.GetManagedFields(); len(mf) != 1 || mf[0].Manager != "kubectl-create" || mf[0].Operation != metav1.ManagedFieldsOperationUpdate {
					t.Fatalf("managedFields = %+v", mf)
				}
			}},
		{name: "manager from user agent", path: cms, body: `{"metadata":{"name":"b"},"data":{"k":"v"}}`,
			check: func(t *testing.T, r response) {
				if mf := r.meta(t).GetManagedFields(); len(mf) != 1 || mf[0].Manager != "kubectl" {
					t.Fatalf("managedFields = %+v", mf)
				}
			}},
		{name: "generateName", path: cms, body: `{"metadata":{"generateName":"gen-"}}`,
			check: func(t *testing.T, r response) {
				if n := r.meta(t).GetName(); !strings.HasPrefix(n, "gen-") || len(n) != len("gen-")+5 {
					t.Fatalf("name = %q", n)
				}
			}},
		{name: "yaml body", path: cms, contentType: "application/yaml", body: "metadata:\n  name: yam\ndata:\n  k: v\n",
			check: func(t *testing.T, r response) {
				if r.meta(t).GetName() != "yam" {
					t.Fatalf("body %s", r.body)
				}
			}},
		{name: "warn on unknown field", path: cms, body: `{"metadata":{"name":"w"},"dta":{}}`,
			check: func(t *testing.T, r response) {
				if got := r.header.Values("Warning"); len(got) != 1 || got[0] != `299 - "unknown field \"dta\""` {
					t.Fatalf("Warning = %q", got)
				}
			}},
		{name: "ignore unknown field", path: cms, query: "?fieldValidation=Ignore", body: `{"metadata":{"name":"i"},"dta":{}}`,
			check: func(t *testing.T, r response) {
				if got := r.header.Values("Warning"); len(got) != 0 {
					t.Fatalf("Warning = %q", got)
				}
			}},
		{name: "status dropped", path: widgets, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"s"},"spec":{"size":1},"status":{"ready":true}}`,
			check: func(t *testing.T, r response) {
				if _, ok := r.content["status"]; ok {
					t.Fatalf("status kept on create: %s", r.body)
				}
			}},
		{name: "deletionTimestamp cleared", path: widgets, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"d","deletionTimestamp":"2001-01-01T00:00:00Z"}}`,
			check: func(t *testing.T, r response) {
				if r.meta(t).GetDeletionTimestamp() != nil {
					t.Fatalf("deletionTimestamp kept: %s", r.body)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, http.MethodPost, tc.path+tc.query, tc.contentType, tc.body)
			if r.code != http.StatusCreated {
				t.Fatalf("code %d: %s", r.code, r.body)
			}
			tc.check(t, r)
			res := "configmaps"
			if tc.path == widgets {
				res = "widgets"
			}
			if got := f.stored(t, res, "ns", r.meta(t).GetName()); got == nil || got.GetResourceVersion() != r.meta(t).GetResourceVersion() {
				t.Fatalf("stored %v, want the object answered", got)
			}
		})
	}
}

func TestCreateDryRun(t *testing.T) {
	f := newWriteFixture(t)
	r := f.do(t, http.MethodPost, cms+"?dryRun=All", "", `{"metadata":{"name":"dry"}}`)
	if r.code != http.StatusCreated || r.meta(t).GetUID() == "" || r.meta(t).GetResourceVersion() != "" {
		t.Fatalf("code %d body %s", r.code, r.body)
	}
	if f.stored(t, "configmaps", "ns", "dry") != nil {
		t.Fatal("dry run stored the object")
	}
	// Validation still runs.
	r = f.do(t, http.MethodPost, cms+"?dryRun=All", "", `{"metadata":{"name":"X"}}`)
	if r.code != http.StatusUnprocessableEntity {
		t.Fatalf("code %d", r.code)
	}
}
