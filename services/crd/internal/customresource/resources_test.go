package customresource_test

import (
	"reflect"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
)

func TestResourcesNames(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	if len(rs) != 2 {
		t.Fatalf("%d resources, want one per served version", len(rs))
	}
	for version, r := range rs {
		want := resource.Resource{Kind: "Widget", ListKind: "WidgetList", Singular: "widget", Namespaced: true, ShortNames: []string{"wd"}, Categories: []string{"all"}}
		got := resource.Resource{Kind: r.Kind, ListKind: r.ListKind, Singular: r.Singular, Namespaced: r.Namespaced, ShortNames: r.ShortNames, Categories: r.Categories}
		if !reflect.DeepEqual(got, want) || r.GroupVersionResource.String() != "example.com/"+version+", Resource=widgets" {
			t.Errorf("%s: %s %+v, want %+v", version, r.GroupVersionResource, got, want)
		}
		if !r.Subresources.Status || r.Subresources.Scale != nil {
			t.Errorf("%s: subresources %+v, want status only", version, r.Subresources)
		}
	}
}

// TestEquivalents shows each served version naming the others as its
// equivalents, with the CRD cut to what conversion reads; a CRD served in
// one version has none.
func TestEquivalents(t *testing.T) {
	crd := widgetCRD(t)
	rs := widgetResources(t, crd)
	for version, r := range rs {
		other := map[string]string{"v1": "v2", "v2": "v1"}[version]
		want := []resource.Equivalent{{Resource: rs[other].GroupVersionResource, Kind: rs[other].GroupVersionKind()}}
		if !reflect.DeepEqual(r.Equivalents, want) {
			t.Errorf("%s: equivalents %+v, want %+v", version, r.Equivalents, want)
		}
		d := r.Definition
		if d == nil || d.Name != crd.Name || d.UID != crd.UID || d.Generation != crd.Generation || d.Spec.Group != crd.Spec.Group ||
			len(d.Spec.Versions) != 2 || d.Spec.Versions[0].Schema != nil || !reflect.DeepEqual(d.Spec.Conversion, crd.Spec.Conversion) {
			t.Errorf("%s: definition %+v, want the CRD's name, uid, generation, group, versions without schemas and conversion", version, d)
		}
	}
	crd.Spec.Versions[1].Served = false
	for version, r := range widgetResources(t, crd) {
		if r.Equivalents != nil || r.Definition != nil {
			t.Errorf("%s, the one served version: equivalents %+v and definition %v, want none", version, r.Equivalents, r.Definition)
		}
	}
}

func TestPrinterColumns(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "creationTimestamp": now.Add(-3 * time.Hour).Format(time.RFC3339)},
		"spec":       map[string]any{"replicas": int64(2)},
	}}
	type column struct {
		def   metav1.TableColumnDefinition
		value any
	}
	tests := []struct {
		version string
		want    []column
	}{{
		version: "v1",
		want: []column{
			{metav1.TableColumnDefinition{Name: "Replicas", Type: "integer", Description: "wanted replicas"}, int64(2)},
			// A path that finds nothing is an empty cell, as in kube.
			{metav1.TableColumnDefinition{Name: "Mode", Type: "string", Priority: 1}, nil},
			{metav1.TableColumnDefinition{Name: "Created", Type: "date"}, "3h"},
		},
	}, {
		// Without additionalPrinterColumns, kube prints the age.
		version: "v2",
		want: []column{
			{metav1.TableColumnDefinition{Name: "Age", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}, "3h"},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.version, func(t *testing.T) {
			var got []column
			for _, c := range rs[tc.version].Columns {
				v, err := c.Cell.Value(obj)
				if err != nil {
					t.Fatalf("column %s: %v", c.Name, err)
				}
				got = append(got, column{c.TableColumnDefinition, v})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("columns:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestSelectableFields(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	tests := []struct {
		name       string
		version    string
		spec       map[string]any
		wantFields fields.Set
	}{{
		name:       "set fields",
		version:    "v1",
		spec:       map[string]any{"mode": "slow", "replicas": int64(3)},
		wantFields: fields.Set{"metadata.name": "w", "metadata.namespace": "ns", "spec.mode": "slow", "spec.replicas": "3"},
	}, {
		name:       "missing fields select as empty",
		version:    "v1",
		spec:       map[string]any{},
		wantFields: fields.Set{"metadata.name": "w", "metadata.namespace": "ns", "spec.mode": "", "spec.replicas": ""},
	}, {
		// A stored object can hold a null where the schema allows it.
		name:       "a null selects as empty",
		version:    "v1",
		spec:       map[string]any{"mode": nil, "replicas": int64(0)},
		wantFields: fields.Set{"metadata.name": "w", "metadata.namespace": "ns", "spec.mode": "", "spec.replicas": "0"},
	}, {
		name:       "a version without selectableFields has the metadata fields only",
		version:    "v2",
		spec:       map[string]any{"mode": "slow"},
		wantFields: fields.Set{"metadata.name": "w", "metadata.namespace": "ns"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "example.com/" + tc.version,
				"kind":       "Widget",
				"metadata":   map[string]any{"name": "w", "namespace": "ns", "labels": map[string]any{"app": "web"}},
				"spec":       tc.spec,
			}}
			var attrs storage.AttrFunc = rs[tc.version].AttrFunc()
			l, f, err := attrs(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(l, labels.Set{"app": "web"}) {
				t.Errorf("labels = %v, want app=web", l)
			}
			if !reflect.DeepEqual(f, tc.wantFields) {
				t.Errorf("fields = %v, want %v", f, tc.wantFields)
			}
		})
	}
}

// TestDeprecationWarnings checks the warnings every response of a
// deprecated version carries: the CRD's own, or kube's default naming
// the newest served version that is not deprecated.
func TestDeprecationWarnings(t *testing.T) {
	own := "use v2, v1 goes in June"
	tests := []struct {
		name   string
		modify func(v1, v2 *apiextensionsv1.CustomResourceDefinitionVersion)
		want   map[string][]string
	}{
		{name: "none deprecated", modify: func(_, _ *apiextensionsv1.CustomResourceDefinitionVersion) {}, want: map[string][]string{}},
		{name: "default warning", modify: func(v1, _ *apiextensionsv1.CustomResourceDefinitionVersion) { v1.Deprecated = true },
			want: map[string][]string{"v1": {"example.com/v1 Widget is deprecated; use example.com/v2 Widget"}}},
		{name: "no newer version to name", modify: func(_, v2 *apiextensionsv1.CustomResourceDefinitionVersion) { v2.Deprecated = true },
			want: map[string][]string{"v2": {"example.com/v2 Widget is deprecated"}}},
		{name: "the CRD's own warning", modify: func(v1, _ *apiextensionsv1.CustomResourceDefinitionVersion) {
			v1.Deprecated, v1.DeprecationWarning = true, &own
		}, want: map[string][]string{"v1": {own}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := widgetCRD(t)
			tt.modify(&crd.Spec.Versions[0], &crd.Spec.Versions[1])
			got := map[string][]string{}
			for v, r := range widgetResources(t, crd) {
				if len(r.Warnings) > 0 {
					got[v] = r.Warnings
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("warnings %q, want %q", got, tt.want)
			}
		})
	}
}
