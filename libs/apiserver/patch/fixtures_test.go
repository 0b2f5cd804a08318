package patch_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/patch"
	"kplane.dev/libs/apiserver/resource"
)

// configMapSchema is the ConfigMap schema that openapi-gen generates for
// k8s.io/api, so managed fields follow the real one: data and
// metadata.labels are granular maps.
func configMapSchema(tb testing.TB) *resource.Schema {
	tb.Helper()
	s, err := builtin.Schema(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func configMaps(tb testing.TB) *resource.Resource {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	o, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		tb.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: corev1.SchemeGroupVersion.WithResource("configmaps"),
		Kind:                 "ConfigMap",
		Namespaced:           true,
		Schema:               configMapSchema(tb),
		Objects:              o,
	}
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// widgets is a custom resource without a schema, served unstructured, with
// a status subresource.
func widgets() *resource.Resource {
	return &resource.Resource{
		GroupVersionResource: widgetGVK.GroupVersion().WithResource("widgets"),
		Kind:                 "Widget",
		Namespaced:           true,
		Subresources:         resource.Subresources{Status: true},
		Objects:              objects.NewUnstructured(widgetGVK, "WidgetList"),
	}
}

func newPatcher(tb testing.TB, r *resource.Resource) *patch.Patcher {
	tb.Helper()
	p, err := patch.New(r)
	if err != nil {
		tb.Fatalf("patch.New(%s): %v", r.GroupResource(), err)
	}
	return p
}

// storedConfigMap is the ConfigMap "a" in namespace "ns" as storage would
// return it: created by kubectl-client-side-apply, which owns data.key.
func storedConfigMap(tb testing.TB, p *patch.Patcher) *corev1.ConfigMap {
	tb.Helper()
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", UID: "uid-a", ResourceVersion: "5", Labels: map[string]string{"app": "web"}},
		Data:       map[string]string{"key": "value"},
	}
	out, err := p.Update(nil, cm, "kubectl-client-side-apply", "")
	if err != nil {
		tb.Fatal(err)
	}
	return out.(*corev1.ConfigMap)
}

// storedWidget is the Widget "w" in namespace "ns", created by "creator".
func storedWidget(tb testing.TB, p *patch.Patcher) *unstructured.Unstructured {
	tb.Helper()
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata":   map[string]any{"name": "w", "namespace": "ns", "uid": "uid-w", "resourceVersion": "7"},
		"spec":       map[string]any{"size": int64(3), "color": "red"},
		"status":     map[string]any{"ready": true},
	}}
	out, err := p.Update(nil, w, "creator", "")
	if err != nil {
		tb.Fatal(err)
	}
	return out.(*unstructured.Unstructured)
}

var (
	cmOpts     = patch.Options{Name: "a", Namespace: "ns", FieldManager: "tester"}
	widgetOpts = patch.Options{Name: "w", Namespace: "ns", FieldManager: "tester"}
)

// doPatch patches current with body as the REST layer does: the body is
// checked first, then applied.
func doPatch(p *patch.Patcher, current runtime.Object, pt types.PatchType, body []byte, opts patch.Options) (runtime.Object, error) {
	b, err := patch.NewBody(pt, body)
	if err != nil {
		return nil, err
	}
	return p.Patch(context.Background(), current, b, opts)
}
