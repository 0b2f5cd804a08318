package rest_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

func namespaceResource(tb testing.TB) *resource.Resource {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	gvk := corev1.SchemeGroupVersion.WithKind("Namespace")
	o, err := objects.NewTyped(scheme, gvk, "NamespaceList")
	if err != nil {
		tb.Fatal(err)
	}
	s, err := builtin.Schema(gvk)
	if err != nil {
		tb.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: corev1.SchemeGroupVersion.WithResource("namespaces"),
		Kind:                 "Namespace",
		Subresources:         resource.Subresources{Status: true, Finalize: true},
		Schema:               s,
		Objects:              o,
		Strategy:             namespaceStrategy{},
	}
}

// namespaceStrategy gives namespaces the "kubernetes" finalizer and the
// deferred deletion of kube's namespace registry.
type namespaceStrategy struct{}

var _ rest.DeferredDeleter = namespaceStrategy{}

func (namespaceStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	ns.Status.Phase = corev1.NamespaceActive
}
func (namespaceStrategy) Validate(context.Context, runtime.Object) field.ErrorList         { return nil }
func (namespaceStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (namespaceStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
func (namespaceStrategy) PrepareForDelete(obj runtime.Object) {
	obj.(*corev1.Namespace).Status.Phase = corev1.NamespaceTerminating
}
func (namespaceStrategy) Finalizing(obj runtime.Object) bool {
	return len(obj.(*corev1.Namespace).Spec.Finalizers) != 0
}

const namespaces = "/api/v1/namespaces"

// nsState is what a test looks at in a namespace.
type nsState struct {
	finalizers, metaFinalizers []string
	phase                      string
	deleting                   bool
	labels                     map[string]string
}

func namespaceState(u *unstructured.Unstructured) nsState {
	fs, _, _ := unstructured.NestedStringSlice(u.Object, "spec", "finalizers")
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	return nsState{finalizers: fs, metaFinalizers: u.GetFinalizers(), phase: phase, deleting: u.GetDeletionTimestamp() != nil, labels: u.GetLabels()}
}

func wantNamespace(tb testing.TB, got *unstructured.Unstructured, want nsState) {
	tb.Helper()
	if got == nil {
		tb.Fatal("namespace is gone")
	}
	s := namespaceState(got)
	if !slices.Equal(s.finalizers, want.finalizers) || !slices.Equal(s.metaFinalizers, want.metaFinalizers) || s.phase != want.phase || s.deleting != want.deleting || len(s.labels) != len(want.labels) {
		tb.Fatalf("namespace %+v, want %+v", s, want)
	}
}

func TestNamespaceDeferredDeletion(t *testing.T) {
	f := newWriteFixture(t)
	active := nsState{finalizers: []string{"kubernetes"}, phase: "Active"}
	terminating := nsState{finalizers: []string{"kubernetes"}, phase: "Terminating", deleting: true}

	wantNamespace(t, f.create(t, namespaces, `{"metadata":{"name":"x"}}`).meta(t), active)
	// The main resource and /status keep spec.finalizers; /status keeps
	// everything but status.
	r := f.do(t, http.MethodPut, namespaces+"/x", "", `{"metadata":{"name":"x"},"spec":{"finalizers":[]},"status":{"phase":"Terminating"}}`)
	wantNamespace(t, r.meta(t), active)
	r = f.do(t, http.MethodPut, namespaces+"/x/status", "", `{"metadata":{"name":"x","labels":{"a":"b"}},"spec":{"finalizers":[]},"status":{"phase":"Active"}}`)
	wantNamespace(t, r.meta(t), active)

	r = f.do(t, http.MethodDelete, namespaces+"/x", "", "")
	if r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	wantNamespace(t, r.meta(t), terminating)
	wantNamespace(t, f.stored(t, "namespaces", "", "x"), terminating)
	rv := f.stored(t, "namespaces", "", "x").GetResourceVersion()
	r = f.do(t, http.MethodDelete, namespaces+"/x", "", "")
	if r.code != http.StatusOK || r.meta(t).GetResourceVersion() != rv {
		t.Fatalf("second delete: %d %s, want the unchanged namespace at rv %s", r.code, r.body, rv)
	}

	for _, verb := range []string{"get", "patch"} {
		r := f.do(t, strings.ToUpper(verb), namespaces+"/x/finalize", mergeType, `{}`)
		wantStatus(t, r, http.StatusMethodNotAllowed, metav1.StatusReasonMethodNotAllowed, verb+` is not supported on resources of kind "namespaces"`)
	}
	// /finalize changes spec.finalizers alone; emptied, the namespace goes.
	r = f.do(t, http.MethodPut, namespaces+"/x/finalize", "", `{"metadata":{"name":"x","labels":{"a":"b"}},"spec":{"finalizers":[]}}`)
	if r.code != http.StatusOK {
		t.Fatalf("finalize: %d %s", r.code, r.body)
	}
	wantNamespace(t, r.meta(t), nsState{phase: "Terminating", deleting: true})
	if f.stored(t, "namespaces", "", "x") != nil {
		t.Fatal("a finalized namespace was kept")
	}
}

func TestNamespaceWaitsForBothFinalizerLists(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, namespaces, `{"metadata":{"name":"y","finalizers":["example.com/hold"]}}`)
	if r := f.do(t, http.MethodDelete, namespaces+"/y", "", ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	r := f.do(t, http.MethodPut, namespaces+"/y/finalize", "", `{"metadata":{"name":"y"},"spec":{"finalizers":[]}}`)
	wantNamespace(t, r.meta(t), nsState{metaFinalizers: []string{"example.com/hold"}, phase: "Terminating", deleting: true})
	wantNamespace(t, f.stored(t, "namespaces", "", "y"), nsState{metaFinalizers: []string{"example.com/hold"}, phase: "Terminating", deleting: true})

	r = f.do(t, http.MethodPatch, namespaces+"/y", mergeType, `{"metadata":{"finalizers":null}}`)
	if r.code != http.StatusOK {
		t.Fatalf("remove finalizer: %d %s", r.code, r.body)
	}
	if f.stored(t, "namespaces", "", "y") != nil {
		t.Fatal("a namespace without finalizers was kept")
	}
}

func TestNamespaceWithoutFinalizersGoesAtOnce(t *testing.T) {
	f := newWriteFixture(t)
	f.create(t, namespaces, `{"metadata":{"name":"z"}}`)
	if r := f.do(t, http.MethodPut, namespaces+"/z/finalize", "", `{"metadata":{"name":"z"},"spec":{"finalizers":[]}}`); r.code != http.StatusOK {
		t.Fatalf("finalize: %d %s", r.code, r.body)
	}
	if r := f.do(t, http.MethodDelete, namespaces+"/z", "", ""); r.code != http.StatusOK {
		t.Fatalf("delete: %d %s", r.code, r.body)
	}
	if f.stored(t, "namespaces", "", "z") != nil {
		t.Fatal("a namespace without finalizers was kept")
	}
}
