package rest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// admissionLog records what admission plugins saw, in order.
type admissionLog struct {
	mu    sync.Mutex
	calls []string
	attrs []rest.Attributes
}

func (l *admissionLog) record(phase string, a *rest.Attributes) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, fmt.Sprintf("%s %s %s/%s", phase, a.Operation, a.Resource.Resource, a.Subresource))
	l.attrs = append(l.attrs, *a)
}

func (l *admissionLog) take() ([]string, []rest.Attributes) {
	l.mu.Lock()
	defer l.mu.Unlock()
	calls, attrs := l.calls, l.attrs
	l.calls, l.attrs = nil, nil
	return calls, attrs
}

// mutator records its calls and applies fn, if any.
type mutator struct {
	log *admissionLog
	fn  func(a *rest.Attributes) error
}

func (m mutator) Handles(rest.Operation) bool { return true }
func (m mutator) Admit(_ context.Context, a *rest.Attributes) error {
	m.log.record("mutate", a)
	if m.fn != nil {
		return m.fn(a)
	}
	return nil
}

// validator records its calls and returns fn's verdict, if any.
type validator struct {
	log *admissionLog
	fn  func(a *rest.Attributes) error
}

func (v validator) Handles(rest.Operation) bool { return true }
func (v validator) Validate(_ context.Context, a *rest.Attributes) error {
	v.log.record("validate", a)
	if v.fn != nil {
		return v.fn(a)
	}
	return nil
}

// widgetSize reads spec.size of an unstructured object.
func widgetSize(a *rest.Attributes) int64 {
	size, _, _ := unstructured.NestedInt64(a.Object.(*unstructured.Unstructured).Object, "spec", "size")
	return size
}

func TestAdmissionOrder(t *testing.T) {
	log := &admissionLog{}
	var validatedUID, validatedSize any
	f := newWriteFixture(t, rest.WithAdmission(
		mutator{log: log, fn: func(a *rest.Attributes) error {
			u, ok := a.Object.(*unstructured.Unstructured)
			if !ok || u.GetLabels()["size"] == "" {
				return nil
			}
			// The strategy refuses a negative size: a mutation seen by
			// validation shows admission ran first.
			var size int64
			if _, err := fmt.Sscan(u.GetLabels()["size"], &size); err != nil {
				return err
			}
			return unstructured.SetNestedField(u.Object, size, "spec", "size")
		}},
		validator{log: log, fn: func(a *rest.Attributes) error {
			if m, err := meta.Accessor(a.Object); err == nil {
				validatedUID = string(m.GetUID())
			}
			validatedSize = widgetSize(a)
			return nil
		}},
	))
	cases := []struct {
		name, body string
		code       int
		calls      []string
	}{
		{name: "mutation reaches the strategy's validation",
			body:  `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"neg","labels":{"size":"-1"}},"spec":{"size":1}}`,
			code:  http.StatusUnprocessableEntity,
			calls: []string{"mutate CREATE widgets/"}},
		{name: "invalid object never reaches validating admission",
			body:  `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"bad"},"spec":{"size":-2}}`,
			code:  http.StatusUnprocessableEntity,
			calls: []string{"mutate CREATE widgets/"}},
		{name: "validating admission sees the mutated, prepared object",
			body:  `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"ok","labels":{"size":"7"}},"spec":{"size":1}}`,
			code:  http.StatusCreated,
			calls: []string{"mutate CREATE widgets/", "validate CREATE widgets/"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, http.MethodPost, widgets, "", tc.body)
			if r.code != tc.code {
				t.Fatalf("got %d %s, want %d", r.code, r.body, tc.code)
			}
			if calls, _ := log.take(); !slices.Equal(calls, tc.calls) {
				t.Fatalf("admission calls %q, want %q", calls, tc.calls)
			}
		})
	}
	stored := f.stored(t, "widgets", "ns", "ok")
	if validatedUID != string(stored.GetUID()) || validatedSize != int64(7) {
		t.Fatalf("validating admission saw uid %v size %v, stored uid %s size 7", validatedUID, validatedSize, stored.GetUID())
	}
}

func TestAdmissionDenialLeavesStorageUntouched(t *testing.T) {
	log := &admissionLog{}
	deny := false
	denied := apierrors.NewForbidden(schema.GroupResource{Group: "example.com", Resource: "widgets"}, "w", fmt.Errorf("no widgets today"))
	f := newWriteFixture(t, rest.WithAdmission(validator{log: log, fn: func(*rest.Attributes) error {
		if deny {
			return denied
		}
		return nil
	}}))
	f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`)
	before := f.stored(t, "widgets", "ns", "w")
	log.take()
	deny = true
	cases := []struct {
		name, method, path, contentType, body string
		op                                    string
	}{
		{name: "create", method: http.MethodPost, path: widgets, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"new"}}`, op: "validate CREATE widgets/"},
		{name: "update", method: http.MethodPut, path: widgets + "/w", body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2}}`, op: "validate UPDATE widgets/"},
		{name: "patch", method: http.MethodPatch, path: widgets + "/w", contentType: mergeType, body: `{"spec":{"size":3}}`, op: "validate UPDATE widgets/"},
		{name: "status", method: http.MethodPut, path: widgets + "/w/status", body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"x"}}`, op: "validate UPDATE widgets/status"},
		{name: "apply create", method: http.MethodPatch, path: widgets + "/applied?fieldManager=t", contentType: applyType, body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"}}`, op: "validate CREATE widgets/"},
		{name: "delete", method: http.MethodDelete, path: widgets + "/w", op: "validate DELETE widgets/"},
		{name: "deletecollection", method: http.MethodDelete, path: widgets, op: "validate DELETE widgets/"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, tc.method, tc.path, tc.contentType, tc.body)
			wantStatus(t, r, http.StatusForbidden, metav1.StatusReasonForbidden, `widgets.example.com "w" is forbidden: no widgets today`)
			if calls, _ := log.take(); len(calls) != 1 || calls[0] != tc.op {
				t.Fatalf("admission calls %q, want [%q]", calls, tc.op)
			}
			if got := f.stored(t, "widgets", "ns", "w"); got.GetResourceVersion() != before.GetResourceVersion() {
				t.Fatalf("a denied write changed the object: rv %s, was %s", got.GetResourceVersion(), before.GetResourceVersion())
			}
			for _, name := range []string{"new", "applied"} {
				if f.stored(t, "widgets", "ns", name) != nil {
					t.Fatalf("a denied write created %s", name)
				}
			}
		})
	}
}

func TestAdmissionAttributes(t *testing.T) {
	log := &admissionLog{}
	f := newWriteFixture(t, rest.WithAdmission(validator{log: log}))
	// Requests carry the user the front proxy authenticated.
	client := &http.Client{Transport: frontproxy.Loopback(f.handler, frontproxy.User{Name: "alice", Groups: []string{"devs"}})}
	w := f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`).meta(t)
	log.take()
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	gvr := gvk.GroupVersion().WithResource("widgets")
	cases := []struct {
		name, method, path, body string
		want                     rest.Attributes
		options                  string
		hasObject, hasOld        bool
	}{
		{name: "status update, dry run", method: http.MethodPut, path: widgets + "/w/status?dryRun=All",
			body:    `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"status":{"phase":"x"}}`,
			want:    rest.Attributes{Operation: rest.Update, Resource: gvr, Subresource: "status", Kind: gvk, Namespace: "ns", Name: "w", DryRun: true},
			options: "UpdateOptions", hasObject: true, hasOld: true},
		{name: "delete", method: http.MethodDelete, path: widgets + "/w",
			want:    rest.Attributes{Operation: rest.Delete, Resource: gvr, Kind: gvk, Namespace: "ns", Name: "w"},
			options: "DeleteOptions", hasOld: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://core"+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", jsonType)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			_, attrs := log.take()
			if len(attrs) != 1 {
				t.Fatalf("%d admission calls, want 1", len(attrs))
			}
			a := attrs[0]
			if a.Operation != tc.want.Operation || a.Resource != tc.want.Resource || a.Subresource != tc.want.Subresource ||
				a.Kind != tc.want.Kind || a.Namespace != tc.want.Namespace || a.Name != tc.want.Name || a.DryRun != tc.want.DryRun {
				t.Fatalf("got %+v\nwant %+v", a, tc.want)
			}
			if (a.Object != nil) != tc.hasObject || (a.OldObject != nil) != tc.hasOld {
				t.Fatalf("object %v old %v, want object %v old %v", a.Object != nil, a.OldObject != nil, tc.hasObject, tc.hasOld)
			}
			if tc.hasOld && resourceVersion(t, a.OldObject) != w.GetResourceVersion() {
				t.Fatalf("old object at rv %s, stored at %s", resourceVersion(t, a.OldObject), w.GetResourceVersion())
			}
			if a.Options == nil || a.Options.GetObjectKind().GroupVersionKind().Kind != tc.options {
				t.Fatalf("options %#v, want %s", a.Options, tc.options)
			}
			if a.User == nil || a.User.Username != "alice" || !slices.Equal(a.User.Groups, []string{"devs"}) {
				t.Fatalf("user %v, want alice of devs", a.User)
			}
		})
	}
}

func resourceVersion(tb testing.TB, obj any) string {
	tb.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		tb.Fatal(err)
	}
	return m.GetResourceVersion()
}

func TestNewRefusesInertAdmission(t *testing.T) {
	_, err := rest.New(widgetResource(), nil, storage.NewKeys("/kplane", "example.com", "widgets"), rest.WithAdmission(inert{}))
	if err == nil {
		t.Fatal("New accepted a plugin that neither mutates nor validates")
	}
}

// inert implements neither admission interface.
type inert struct{}

func (inert) Handles(rest.Operation) bool { return true }
