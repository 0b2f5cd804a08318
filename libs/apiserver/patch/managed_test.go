package patch_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/resource"
)

func TestUpdateRecordsManagers(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	created := storedConfigMap(t, p)
	if len(created.ManagedFields) != 1 {
		t.Fatalf("after create managedFields = %s, want one entry", managers(created.ManagedFields))
	}
	e := created.ManagedFields[0]
	const createFields = `{"f:data":{".":{},"f:key":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`
	if e.Manager != "kubectl-client-side-apply" || e.Operation != metav1.ManagedFieldsOperationUpdate || e.APIVersion != "v1" ||
		e.Subresource != "" || e.Time == nil || e.FieldsType != "FieldsV1" || string(e.FieldsV1.Raw) != createFields {
		t.Fatalf("create entry = %+v %s, want an Update by kubectl-client-side-apply of %s", e, e.FieldsV1.Raw, createFields)
	}

	edited := created.DeepCopy()
	edited.Data["other"] = "x"
	out, err := p.Update(created, edited, "editor", "")
	if err != nil {
		t.Fatal(err)
	}
	updated := out.(*corev1.ConfigMap)
	if got := entry(updated.ManagedFields, "editor", metav1.ManagedFieldsOperationUpdate, ""); got == nil || string(got.FieldsV1.Raw) != `{"f:data":{"f:other":{}}}` {
		t.Fatalf("managedFields = %s, want editor to own data.other", managers(updated.ManagedFields))
	}

	// The same manager, operation and subresource share one entry.
	again := updated.DeepCopy()
	again.Data["third"] = "y"
	out, err = p.Update(updated, again, "editor", "")
	if err != nil {
		t.Fatal(err)
	}
	coalesced := out.(*corev1.ConfigMap)
	if len(coalesced.ManagedFields) != 2 {
		t.Fatalf("managedFields = %s, want editor's two updates in one entry", managers(coalesced.ManagedFields))
	}
	if got := entry(coalesced.ManagedFields, "editor", metav1.ManagedFieldsOperationUpdate, ""); string(got.FieldsV1.Raw) != `{"f:data":{"f:other":{},"f:third":{}}}` {
		t.Fatalf("editor's entry = %s, want data.other and data.third", got.FieldsV1.Raw)
	}
}

// A write that changes nothing leaves the stored bytes as they were, so
// storage can skip it: no entry is added and no time moves.
func TestNoOpUpdateKeepsBytes(t *testing.T) {
	cases := []struct {
		name    string
		manager string
	}{
		{"same manager", "kubectl-client-side-apply"},
		{"other manager", "someone-else"},
	}
	for _, r := range []struct {
		name    string
		patcher func(testing.TB) (*patch.Patcher, runtime.Object, func(runtime.Object) ([]byte, error))
	}{
		{"typed", func(tb testing.TB) (*patch.Patcher, runtime.Object, func(runtime.Object) ([]byte, error)) {
			res := configMaps(tb)
			p := newPatcher(tb, res)
			return p, storedConfigMap(tb, p), res.Objects.Encode
		}},
		{"unstructured", func(tb testing.TB) (*patch.Patcher, runtime.Object, func(runtime.Object) ([]byte, error)) {
			res := widgets()
			p := newPatcher(tb, res)
			return p, storedWidget(tb, p), res.Objects.Encode
		}},
	} {
		for _, tc := range cases {
			t.Run(r.name+"/"+tc.name, func(t *testing.T) {
				p, live, encode := r.patcher(t)
				before, err := encode(live)
				if err != nil {
					t.Fatal(err)
				}
				out, err := p.Update(live, live.DeepCopyObject(), tc.manager, "")
				if err != nil {
					t.Fatal(err)
				}
				after, err := encode(out)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(before, after) {
					t.Fatalf("no-op update changed the object:\n%s\n%s", before, after)
				}
			})
		}
	}
}

func TestUpdateManagedFieldsFromClient(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	cases := []struct {
		name string
		sent []metav1.ManagedFieldsEntry
		want []string
	}{
		{"omitted keeps the stored ones", nil, []string{"kubectl-client-side-apply", "editor"}},
		{"invalid ones are replaced by the stored ones", []metav1.ManagedFieldsEntry{{Manager: "forged", Operation: "Bogus", FieldsType: "FieldsV9"}}, []string{"kubectl-client-side-apply", "editor"}},
		{"an empty list resets them", []metav1.ManagedFieldsEntry{}, nil},
		{"valid ones replace the stored ones", []metav1.ManagedFieldsEntry{{Manager: "mine", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:key":{}}}`)}}}, []string{"mine", "editor"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := storedConfigMap(t, p)
			obj := live.DeepCopy()
			obj.ManagedFields = tc.sent
			obj.Data["other"] = "x"
			out, err := p.Update(live, obj, "editor", "")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range out.(*corev1.ConfigMap).ManagedFields {
				got = append(got, e.Manager)
			}
			slices.Sort(got)
			if want := slices.Sorted(slices.Values(tc.want)); !slices.Equal(got, want) {
				t.Fatalf("managers = %v, want %v", got, want)
			}
		})
	}
}

func TestUpdateThroughStatus(t *testing.T) {
	p := newPatcher(t, widgets())
	live := storedWidget(t, p)
	obj := live.DeepCopy()
	if err := unstructured.SetNestedField(obj.Object, false, "status", "ready"); err != nil {
		t.Fatal(err)
	}
	out, err := p.Update(live, obj, "controller", "status")
	if err != nil {
		t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if e := entry(u.GetManagedFields(), "controller", metav1.ManagedFieldsOperationUpdate, "status"); e == nil || string(e.FieldsV1.Raw) != `{"f:status":{"f:ready":{}}}` {
		t.Fatalf("managedFields = %s, want controller to own status.ready through status", managers(u.GetManagedFields()))
	}
	if _, err := p.Update(live, obj, "controller", "scale"); err == nil {
		t.Fatal("Update through an undeclared subresource succeeded")
	}
}

// A non-apply patch names its manager after the user agent when it has no
// fieldManager, as kube-apiserver does.
func TestPatchManagerFromUserAgent(t *testing.T) {
	p := newPatcher(t, configMaps(t))
	opts := cmOpts
	opts.FieldManager = ""
	opts.UserAgent = "kubectl/v1.37.2 (linux/amd64) kubernetes/abcdef"
	out, err := doPatch(p, storedConfigMap(t, p), types.MergePatchType, []byte(`{"data":{"x":"y"}}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	if e := entry(out.(*corev1.ConfigMap).ManagedFields, "kubectl", metav1.ManagedFieldsOperationUpdate, ""); e == nil {
		t.Fatalf("managedFields = %s, want an entry for kubectl", managers(out.(*corev1.ConfigMap).ManagedFields))
	}
}

func TestManagerName(t *testing.T) {
	cases := []struct{ fieldManager, userAgent, want string }{
		{"ctrl", "kubectl/v1", "ctrl"},
		{"", "kubectl/v1.37.2 (linux/amd64)", "kubectl"},
		{"", "my\x00agent", "myagent"},
		{"", string(bytes.Repeat([]byte("a"), 200)), string(bytes.Repeat([]byte("a"), 128))},
		{"", "", ""},
	}
	for _, tc := range cases {
		if got := patch.ManagerName(tc.fieldManager, tc.userAgent); got != tc.want {
			t.Errorf("ManagerName(%q, %q) = %q, want %q", tc.fieldManager, tc.userAgent, got, tc.want)
		}
	}
}

// A schema that does not describe the resource's kind would make every
// managedFields update fail silently, so New refuses it.
func TestNewRejectsSchema(t *testing.T) {
	secret, err := builtin.Schema(corev1.SchemeGroupVersion.WithKind("Secret"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		schema *resource.Schema
		want   string
	}{
		{"unknown ref", &resource.Schema{Ref: "io.k8s.api.core.v1.Nope", Definitions: secret.Definitions}, `resolve OpenAPI definition "io.k8s.api.core.v1.Nope"`},
		{"another kind", secret, "does not describe /v1, Kind=ConfigMap"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := configMaps(t)
			r.Schema = tc.schema
			if _, err := patch.New(r); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error with %q", err, tc.want)
			}
		})
	}
}
