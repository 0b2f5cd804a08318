package builtin_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/openapi/builtin"
)

func TestSchema(t *testing.T) {
	tests := []struct {
		gvk  schema.GroupVersionKind
		want string
	}{
		{corev1.SchemeGroupVersion.WithKind("ConfigMap"), "io.k8s.api.core.v1.ConfigMap"},
		{corev1.SchemeGroupVersion.WithKind("Namespace"), "io.k8s.api.core.v1.Namespace"},
		{rbacv1.SchemeGroupVersion.WithKind("Role"), "io.k8s.api.rbac.v1.Role"},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition"},
		{schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"}, "io.k8s.kube-aggregator.pkg.apis.apiregistration.v1.APIService"},
		{schema.GroupVersionKind{Group: "coordination.k8s.io", Version: "v1", Kind: "Lease"}, "io.k8s.api.coordination.v1.Lease"},
	}
	for _, tt := range tests {
		t.Run(tt.gvk.String(), func(t *testing.T) {
			s, err := builtin.Schema(tt.gvk)
			if err != nil {
				t.Fatal(err)
			}
			if s.Ref != tt.want {
				t.Fatalf("Ref = %q, want %q", s.Ref, tt.want)
			}
			def, ok := s.Definitions[s.Ref]
			if !ok {
				t.Fatalf("Definitions lacks %q", s.Ref)
			}
			if !hasGVK(def, tt.gvk) {
				t.Fatalf("%s has no %s extension naming %s: %v", s.Ref, builtin.ExtensionGVK, tt.gvk, def.Extensions[builtin.ExtensionGVK])
			}
			meta := def.Properties["metadata"]
			if got := meta.Ref.String(); got != "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
				t.Fatalf("metadata refers to %q", got)
			}
		})
	}
	if _, err := builtin.Schema(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}); err == nil {
		t.Fatal("Schema of an unknown kind succeeded")
	}
}

// The definitions must be shared, not rebuilt per resource.
func TestSchemaSharesDefinitions(t *testing.T) {
	a, err := builtin.Schema(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := builtin.Schema(rbacv1.SchemeGroupVersion.WithKind("Role"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Definitions[a.Ref] != b.Definitions[a.Ref] {
		t.Fatal("two schemas carry different definition maps")
	}
}

// Server-side apply builds its type converter from these definitions; the
// list-type and map-key extensions must survive for it to merge lists.
func TestTypeConverterAcceptsDefinitions(t *testing.T) {
	defs, err := builtin.Definitions()
	if err != nil {
		t.Fatal(err)
	}
	subject := defs["io.k8s.api.rbac.v1.Subject"]
	if subject == nil {
		t.Fatal("no definition of rbac Subject")
	}
	if got := defs["io.k8s.api.core.v1.PodSpec"].Properties["containers"].Extensions["x-kubernetes-list-map-keys"]; got == nil {
		t.Fatal("PodSpec.containers lost x-kubernetes-list-map-keys")
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		t.Fatalf("NewTypeConverter: %v", err)
	}
	objects := []struct {
		name    string
		obj     map[string]any
		wantErr bool
	}{
		{"ConfigMap", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}, "data": map[string]any{"k": "v"}}, false},
		{"Role", map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "r"}, "rules": []any{map[string]any{"verbs": []any{"get"}, "resources": []any{"pods"}, "apiGroups": []any{""}}}}, false},
		{"Namespace", map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "n"}, "spec": map[string]any{"finalizers": []any{"kubernetes"}}}, false},
		// Proves the converter reads the ConfigMap schema: data is a map.
		{"ConfigMap with list data", map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a"}, "data": []any{"k"}}, true},
	}
	for _, o := range objects {
		t.Run(o.name, func(t *testing.T) {
			_, err := tc.ObjectToTyped(&unstructured.Unstructured{Object: o.obj})
			if (err != nil) != o.wantErr {
				t.Fatalf("ObjectToTyped: error %v, want error %v", err, o.wantErr)
			}
		})
	}
}

func hasGVK(s *spec.Schema, gvk schema.GroupVersionKind) bool {
	list, _ := s.Extensions[builtin.ExtensionGVK].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		if m["group"] == gvk.Group && m["version"] == gvk.Version && m["kind"] == gvk.Kind {
			return true
		}
	}
	return false
}
