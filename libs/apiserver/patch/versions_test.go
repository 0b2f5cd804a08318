package patch_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/resource"
)

// versionedWidgets are Widgets served in one version of two, converting
// between them as a CRD's conversion does: v1's spec.size is v2's
// spec.replicas.
type versionedWidgets struct {
	*objects.Unstructured
}

var _ resource.VersionConverter = versionedWidgets{}

func (versionedWidgets) ConvertToVersion(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	u := obj.(*unstructured.Unstructured)
	from, to := []string{"spec", "size"}, []string{"spec", "replicas"}
	if gv.Version == "v1" {
		from, to = to, from
	}
	if v, ok, _ := unstructured.NestedFieldCopy(u.Object, from...); ok {
		unstructured.RemoveNestedField(u.Object, from...)
		if err := unstructured.SetNestedField(u.Object, v, to...); err != nil {
			return nil, err
		}
	}
	u.SetAPIVersion(gv.String())
	return u, nil
}

func versionedWidgetsIn(version string) *resource.Resource {
	gvk := widgetGVK.GroupKind().WithVersion(version)
	return &resource.Resource{
		GroupVersionResource: gvk.GroupVersion().WithResource("widgets"),
		Kind:                 "Widget",
		Namespaced:           true,
		Objects:              versionedWidgets{objects.NewUnstructured(gvk, "WidgetList")},
	}
}

// An update through one version of an object whose managers recorded
// their fields through another reads their entries by converting the
// object, as kube's field manager does for a CRD's versions: the update
// takes over what it changed and records its own entry.
func TestUpdateThroughAnotherVersion(t *testing.T) {
	v1, v2 := newPatcher(t, versionedWidgetsIn("v1")), newPatcher(t, versionedWidgetsIn("v2"))
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "ns", "uid": "uid-w", "resourceVersion": "7"},
		"spec":       map[string]any{"size": int64(3), "color": "red"},
	}}
	created, err := v1.Update(nil, w, "creator", "")
	if err != nil {
		t.Fatal(err)
	}
	live, err := versionedWidgets{}.ConvertToVersion(created.DeepCopyObject(), schema.GroupVersion{Group: "example.com", Version: "v2"})
	if err != nil {
		t.Fatal(err)
	}
	edited := live.DeepCopyObject().(*unstructured.Unstructured)
	if err := unstructured.SetNestedField(edited.Object, int64(4), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	out, err := v2.Update(live, edited, "editor", "")
	if err != nil {
		t.Fatal(err)
	}
	entries := out.(*unstructured.Unstructured).GetManagedFields()
	tests := []struct {
		manager, apiVersion, fields string
	}{
		{manager: "creator", apiVersion: "example.com/v1", fields: `{"f:spec":{".":{},"f:color":{}}}`},
		{manager: "editor", apiVersion: "example.com/v2", fields: `{"f:spec":{"f:replicas":{}}}`},
	}
	for _, tt := range tests {
		e := entry(entries, tt.manager, metav1.ManagedFieldsOperationUpdate, "")
		if e == nil || e.APIVersion != tt.apiVersion || string(e.FieldsV1.Raw) != tt.fields {
			t.Errorf("managedFields = %s, want %s's entry in %s of %s", managers(entries), tt.manager, tt.apiVersion, tt.fields)
		}
	}
}

// storedInV1 are versionedWidgets whose storage codec writes v1, as a
// CRD's storage version: what a patch applies to must not go through it.
type storedInV1 struct{ versionedWidgets }

func (s storedInV1) Encode(obj runtime.Object) ([]byte, error) {
	v1, err := s.ConvertToVersion(obj.DeepCopyObject(), schema.GroupVersion{Group: "example.com", Version: "v1"})
	if err != nil {
		return nil, err
	}
	return s.versionedWidgets.Encode(v1)
}

// A merge patch through a version other than the storage version applies
// to the object in that version.
func TestPatchThroughAServedVersion(t *testing.T) {
	r := versionedWidgetsIn("v2")
	r.Objects = storedInV1{versionedWidgets{objects.NewUnstructured(widgetGVK.GroupKind().WithVersion("v2"), "WidgetList")}}
	p := newPatcher(t, r)
	current := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v2",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "ns", "uid": "uid-w", "resourceVersion": "7"},
		"spec":       map[string]any{"replicas": int64(3)},
	}}
	out, err := doPatch(p, current, types.MergePatchType, []byte(`{"metadata":{"finalizers":["a/b"]}}`), patch.Options{Name: "w", FieldManager: "m"})
	if err != nil {
		t.Fatalf("merge patch through v2: %v", err)
	}
	u := out.(*unstructured.Unstructured)
	if got, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); u.GetAPIVersion() != "example.com/v2" || got != 3 || len(u.GetFinalizers()) != 1 {
		t.Errorf("patched = %v, want the v2 object with its finalizer", u.Object)
	}
}
