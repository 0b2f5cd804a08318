package rest_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// create stores an object through the API and returns it.
func (f *writeFixture) create(tb testing.TB, path, body string) response {
	tb.Helper()
	r := f.do(tb, http.MethodPost, path, "", body)
	if r.code != http.StatusCreated {
		tb.Fatalf("create: %d %s", r.code, r.body)
	}
	return r
}

func TestUpdateRefusals(t *testing.T) {
	f := newWriteFixture(t)
	a := f.create(t, cms, `{"metadata":{"name":"a"},"data":{"k":"v"}}`).meta(t)
	rv := a.GetResourceVersion()
	cases := []struct {
		name, path, body string
		code             int
		reason           metav1.StatusReason
		message          string
	}{
		{name: "stale resourceVersion", path: cms + "/a", body: `{"metadata":{"name":"a","resourceVersion":"1"},"data":{"k":"x"}}`,
			code: 409, reason: metav1.StatusReasonConflict, message: `Operation cannot be fulfilled on configmaps "a": the object has been modified; please apply your changes to the latest version and try again`},
		{name: "missing object", path: cms + "/nope", body: `{"metadata":{"name":"nope"}}`,
			code: 404, reason: metav1.StatusReasonNotFound, message: `configmaps "nope" not found`},
		{name: "name mismatch", path: cms + "/a", body: `{"metadata":{"name":"b"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the name of the object (b) does not match the name on the URL (a)`},
		{name: "namespace mismatch", path: cms + "/a", body: `{"metadata":{"name":"a","namespace":"other"}}`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the namespace of the provided object does not match the namespace sent on the request`},
		{name: "other uid", path: cms + "/a", body: `{"metadata":{"name":"a","uid":"other"},"data":{"k":"x"}}`,
			code: 409, reason: metav1.StatusReasonConflict, message: fmt.Sprintf(`Operation cannot be fulfilled on configmaps "a": Precondition failed: UID in precondition: other, UID in object meta: %s`, a.GetUID())},
		{name: "invalid label", path: cms + "/a", body: `{"metadata":{"name":"a","labels":{"a b":"c"}},"data":{"k":"x"}}`,
			code: 422, reason: metav1.StatusReasonInvalid, message: `ConfigMap "a" is invalid: metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`},
		{name: "malformed json", path: cms + "/a", body: `{"metadata":{"name":"a"},`,
			code: 400, reason: metav1.StatusReasonBadRequest, message: `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: unexpected end of JSON input ({"metadata":{"name":"a"},)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantStatus(t, f.do(t, http.MethodPut, tc.path, "", tc.body), tc.code, tc.reason, tc.message)
			if got := f.stored(t, "configmaps", "ns", "a"); got.GetResourceVersion() != rv {
				t.Fatalf("a refused update changed the object: rv %s, was %s", got.GetResourceVersion(), rv)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	f := newWriteFixture(t)
	a := f.create(t, cms, `{"metadata":{"name":"a"},"data":{"k":"v"}}`).meta(t)
	w := f.create(t, widgets, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":1}}`).meta(t)

	put := func(t *testing.T, path, body string) response {
		t.Helper()
		r := f.do(t, http.MethodPut, path, "", body)
		if r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		return r
	}
	t.Run("keeps system metadata, moves generation on data", func(t *testing.T) {
		got := put(t, cms+"/a", fmt.Sprintf(`{"metadata":{"name":"a","resourceVersion":%q,"creationTimestamp":"2001-01-01T00:00:00Z"},"data":{"k":"x"}}`, a.GetResourceVersion())).meta(t)
		if got.GetUID() != a.GetUID() || !got.GetCreationTimestamp().Time.Equal(a.GetCreationTimestamp().Time) || got.GetGeneration() != 2 {
			t.Fatalf("uid %s ts %v generation %d", got.GetUID(), got.GetCreationTimestamp(), got.GetGeneration())
		}
	})
	t.Run("labels alone keep generation", func(t *testing.T) {
		got := put(t, cms+"/a", `{"metadata":{"name":"a","labels":{"l":"1"}},"data":{"k":"x"}}`).meta(t)
		if got.GetGeneration() != 2 || got.GetLabels()["l"] != "1" {
			t.Fatalf("generation %d labels %v", got.GetGeneration(), got.GetLabels())
		}
	})
	t.Run("no-op keeps resourceVersion", func(t *testing.T) {
		before := f.stored(t, "configmaps", "ns", "a").GetResourceVersion()
		got := put(t, cms+"/a", `{"metadata":{"name":"a","labels":{"l":"1"}},"data":{"k":"x"}}`).meta(t)
		if got.GetResourceVersion() != before {
			t.Fatalf("no-op update moved resourceVersion %s -> %s", before, got.GetResourceVersion())
		}
	})
	t.Run("dry run stores nothing", func(t *testing.T) {
		before := f.stored(t, "configmaps", "ns", "a")
		got := put(t, cms+"/a?dryRun=All", `{"metadata":{"name":"a"},"data":{"k":"dry"}}`)
		if got.content["data"].(map[string]any)["k"] != "dry" {
			t.Fatalf("dry run answered %s", got.body)
		}
		if after := f.stored(t, "configmaps", "ns", "a"); after.GetResourceVersion() != before.GetResourceVersion() {
			t.Fatal("dry run stored the update")
		}
	})
	t.Run("main resource keeps status", func(t *testing.T) {
		if _, err := f.stores["widgets"].GuaranteedUpdate(t.Context(), f.keys["widgets"].Object("ns", "w"), nil, setStatus("old")); err != nil {
			t.Fatal(err)
		}
		got := put(t, widgets+"/w", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":2},"status":{"phase":"new"}}`)
		if st := got.content["status"].(map[string]any)["phase"]; st != "old" {
			t.Fatalf("status phase %v, want old", st)
		}
		if got.meta(t).GetGeneration() != w.GetGeneration()+1 {
			t.Fatalf("generation %d", got.meta(t).GetGeneration())
		}
	})
	t.Run("status subresource changes only status", func(t *testing.T) {
		before := f.stored(t, "widgets", "ns", "w")
		got := put(t, widgets+"/w/status", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","labels":{"x":"y"}},"spec":{"size":9},"status":{"phase":"new"}}`)
		if st := got.content["status"].(map[string]any)["phase"]; st != "new" {
			t.Fatalf("status phase %v, want new", st)
		}
		if size := got.content["spec"].(map[string]any)["size"]; size != int64(2) {
			t.Fatalf("spec.size %v changed through /status", size)
		}
		if got.meta(t).GetLabels() != nil || got.meta(t).GetGeneration() != before.GetGeneration() {
			t.Fatalf("labels %v generation %d", got.meta(t).GetLabels(), got.meta(t).GetGeneration())
		}
	})
	t.Run("invalid update leaves the object", func(t *testing.T) {
		before := f.stored(t, "widgets", "ns", "w")
		r := f.do(t, http.MethodPut, widgets+"/w", "", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"size":-5}}`)
		wantStatus(t, r, 422, metav1.StatusReasonInvalid, `Widget.example.com "w" is invalid: spec.size: Invalid value: -5: must be greater than or equal to 0`)
		if after := f.stored(t, "widgets", "ns", "w"); after.GetResourceVersion() != before.GetResourceVersion() {
			t.Fatal("refused update stored")
		}
	})
}

// Many writers PUT against the same resourceVersion: exactly one wins,
// the others get 409 and nothing is lost silently.
func TestConcurrentStaleUpdates(t *testing.T) {
	f := newWriteFixture(t)
	rv := f.create(t, cms, `{"metadata":{"name":"a"},"data":{"n":"0"}}`).meta(t).GetResourceVersion()
	const writers = 16
	codes := make([]int, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = f.do(t, http.MethodPut, cms+"/a", "", fmt.Sprintf(`{"metadata":{"name":"a","resourceVersion":%q},"data":{"n":"%d"}}`, rv, i+1)).code
		}()
	}
	wg.Wait()
	won := -1
	for i, c := range codes {
		switch c {
		case http.StatusOK:
			if won >= 0 {
				t.Fatalf("writers %d and %d both won", won, i)
			}
			won = i
		case http.StatusConflict:
		default:
			t.Fatalf("writer %d got %d", i, c)
		}
	}
	if won < 0 {
		t.Fatal("no writer won")
	}
	if got := f.stored(t, "configmaps", "ns", "a").Object["data"].(map[string]any)["n"]; got != fmt.Sprint(won+1) {
		t.Fatalf("stored n=%v, winner wrote %d", got, won+1)
	}
}
