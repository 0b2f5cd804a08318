package patch_test

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
)

// widgetSchema describes Widget as a CRD's structural schema does once
// converted to definitions: spec.parts is a list of maps keyed by name.
func widgetSchema(t *testing.T) *resource.Schema {
	t.Helper()
	defs, err := builtin.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	const objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	part := spec.Schema{SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
		"name": *spec.StringProperty(), "count": *spec.Int64Property(),
	}}}
	parts := spec.ArrayProperty(&part)
	parts.Extensions = spec.Extensions{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": []any{"name"}}
	widget := &spec.Schema{
		SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty(),
			"kind":       *spec.StringProperty(),
			"metadata":   *spec.RefSchema("#/definitions/" + objectMeta),
			"spec": {SchemaProps: spec.SchemaProps{Type: spec.StringOrArray{"object"}, Properties: map[string]spec.Schema{
				"parts": *parts,
			}}},
		}},
		VendorExtensible: spec.VendorExtensible{Extensions: spec.Extensions{
			"x-kubernetes-group-version-kind": []any{map[string]any{"group": widgetGVK.Group, "version": widgetGVK.Version, "kind": widgetGVK.Kind}},
		}},
	}
	all := map[string]*spec.Schema{"com.example.v1.Widget": widget}
	for name, def := range defs {
		all[name] = def
	}
	return &resource.Schema{Ref: "com.example.v1.Widget", Definitions: all}
}

// With a schema, apply merges list entries by key, each manager owning its
// own, where a schemaless kind would replace the whole list.
func TestApplyCustomResourceWithSchema(t *testing.T) {
	r := widgets()
	r.Schema = widgetSchema(t)
	p := newPatcher(t, r)
	first := []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  parts:\n  - name: a\n    count: 1\n")
	second := []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  parts:\n  - name: b\n    count: 2\n")
	aOpts, bOpts := widgetOpts, widgetOpts
	aOpts.FieldManager, bOpts.FieldManager = "a", "b"
	obj, err := doPatch(p, nil, types.ApplyYAMLPatchType, first, aOpts)
	if err != nil {
		t.Fatalf("apply a: %v", err)
	}
	obj.(*unstructured.Unstructured).SetUID("uid-w")
	obj, err = doPatch(p, obj, types.ApplyYAMLPatchType, second, bOpts)
	if err != nil {
		t.Fatalf("apply b: %v", err)
	}
	parts, _, _ := unstructured.NestedSlice(obj.(*unstructured.Unstructured).Object, "spec", "parts")
	if len(parts) != 2 {
		t.Fatalf("spec.parts = %v, want a's and b's entries", parts)
	}
	bad := []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  colour: red\n")
	_, err = doPatch(p, obj, types.ApplyYAMLPatchType, bad, aOpts)
	checkStatus(t, err, statusError{400, metav1.StatusReasonBadRequest, ".spec.colour: field not declared in schema"})
}
