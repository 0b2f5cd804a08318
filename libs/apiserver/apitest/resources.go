package apitest

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
)

// ConfigMaps and Widgets are the resources the test server serves.
var (
	ConfigMaps = corev1.SchemeGroupVersion.WithResource("configmaps")
	Widgets    = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
)

// Resources declares configmaps as kube-apiserver serves them (typed,
// columns DATA and AGE, the built-in OpenAPI schema) and widgets, an
// unstructured kind with /status, /scale (of .spec.replicas,
// .status.replicas and .status.selector) and a SIZE column taken from
// .spec.size.
// Ages are measured with c (nil: the real clock).
func Resources(c clock.PassiveClock) ([]*resource.Resource, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register core/v1: %w", err)
	}
	cmObjects, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		return nil, err
	}
	cmSchema, err := builtin.Schema(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		return nil, err
	}
	size, err := resource.NewJSONPathCell(".spec.size", "integer", c)
	if err != nil {
		return nil, err
	}
	return []*resource.Resource{
		{
			GroupVersionResource: ConfigMaps,
			Kind:                 "ConfigMap",
			Singular:             "configmap",
			Namespaced:           true,
			ShortNames:           []string{"cm"},
			Objects:              cmObjects,
			Schema:               cmSchema,
			Columns: []resource.Column{
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Data", Type: "string", Description: "Number of data keys"}, Cell: resource.CellFunc(dataCount)},
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Age", Type: "string"}, Cell: resource.AgeCell{Clock: c}},
			},
		},
		{
			GroupVersionResource: Widgets,
			Kind:                 "Widget",
			Singular:             "widget",
			Namespaced:           true,
			Categories:           []string{"all"},
			Subresources: resource.Subresources{Status: true, Scale: &resource.Scale{
				SpecReplicasPath:   ".spec.replicas",
				StatusReplicasPath: ".status.replicas",
				LabelSelectorPath:  ".status.selector",
			}},
			Generation: true,
			Objects:    objects.NewUnstructured(Widgets.GroupVersion().WithKind("Widget"), "WidgetList"),
			Columns: []resource.Column{
				{TableColumnDefinition: metav1.TableColumnDefinition{Name: "Size", Type: "integer"}, Cell: size},
			},
		},
	}, nil
}

// dataCount is the DATA column of kube's configmap printer.
func dataCount(obj runtime.Object) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return nil, fmt.Errorf("not a configmap: %T", obj)
	}
	return int64(len(cm.Data) + len(cm.BinaryData)), nil
}

// Typed declares a kind of k8s.io/api as a plain kube-apiserver serves it:
// its typed codec, its built-in OpenAPI schema, its lowercase kind as the
// singular name, and nothing else (no strategy, columns or subresources,
// which a caller adds to the returned resource when a test needs them).
func Typed(t testing.TB, gvr schema.GroupVersionResource, kind string, namespaced bool) *resource.Resource {
	t.Helper()
	gvk := gvr.GroupVersion().WithKind(kind)
	objs, err := objects.NewTyped(scheme.Scheme, gvk, kind+"List")
	if err != nil {
		t.Fatalf("declare %s: %v", gvr, err)
	}
	s, err := builtin.Schema(gvk)
	if err != nil {
		t.Fatalf("schema of %s: %v", gvk, err)
	}
	return &resource.Resource{
		GroupVersionResource: gvr,
		Kind:                 kind,
		Singular:             strings.ToLower(kind),
		Namespaced:           namespaced,
		Schema:               s,
		Objects:              objs,
	}
}
