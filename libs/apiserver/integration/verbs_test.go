package integration_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"

	"kplane.dev/libs/apiserver/apitest"
)

// TestTypedClientVerbs drives every write verb through client-go's typed
// client, which sends built-in kinds as protobuf, and checks what a
// controller relies on: conflicts, preconditions, patches of each type,
// server-side apply ownership, dry runs and strict field validation.
func TestTypedClientVerbs(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cms := typedClient(t, srv.Config).CoreV1().ConfigMaps("ns")

	created, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "cm-"}, Data: map[string]string{"a": "1"}}, metav1.CreateOptions{FieldManager: "tester"})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if !strings.HasPrefix(created.Name, "cm-") || created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Fatalf("create did not fill server fields: %+v", created.ObjectMeta)
	}
	// Like kube-apiserver's, a ConfigMap carries no generation.
	if created.Generation != 0 {
		t.Fatalf("configmap has generation %d", created.Generation)
	}
	name := created.Name

	stale := created.DeepCopy()
	created.Data["b"] = "2"
	updated, err := cms.Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	stale.Data["c"] = "3"
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: err = %v, want Conflict", err)
	}

	patches := []struct {
		pt   types.PatchType
		body string
		key  string
	}{
		{types.MergePatchType, `{"data":{"merge":"yes"}}`, "merge"},
		{types.StrategicMergePatchType, `{"data":{"strategic":"yes"}}`, "strategic"},
		{types.JSONPatchType, `[{"op":"add","path":"/data/json","value":"yes"}]`, "json"},
	}
	for _, p := range patches {
		got, err := cms.Patch(ctx, name, p.pt, []byte(p.body), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("%s patch: %v", p.pt, err)
		}
		if got.Data[p.key] != "yes" {
			t.Fatalf("%s patch did not apply: %v", p.pt, got.Data)
		}
	}

	applied, err := cms.Apply(ctx, corev1apply.ConfigMap(name, "ns").WithData(map[string]string{"a": "owned"}), metav1.ApplyOptions{FieldManager: "applier"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply over another manager's field: got %v, %v; want Conflict", applied, err)
	}
	applied, err = cms.Apply(ctx, corev1apply.ConfigMap(name, "ns").WithData(map[string]string{"a": "owned"}), metav1.ApplyOptions{FieldManager: "applier", Force: true})
	if err != nil {
		t.Fatalf("forced apply: %v", err)
	}
	if applied.Data["a"] != "owned" || !hasManager(applied, "applier", metav1.ManagedFieldsOperationApply) {
		t.Fatalf("forced apply: data %v, managers %v", applied.Data, applied.ManagedFields)
	}

	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dry"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if _, err := cms.Get(ctx, "dry", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("dry-run create stored the object: %v", err)
	}

	if err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &updated.ResourceVersion}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale resourceVersion precondition: err = %v, want Conflict", err)
	}
	if err := cms.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &created.UID}}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := cms.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: err = %v, want NotFound", err)
	}

	for _, n := range []string{"x", "y"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{"batch": "1"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "batch=1"}); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if left, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "batch=1"}); err != nil || len(left.Items) != 0 {
		t.Fatalf("after deletecollection: %v, %v", left, err)
	}
}

// TestDynamicClientVerbs does the same for a custom resource through the
// dynamic client (JSON), including strict field validation and /status.
func TestDynamicClientVerbs(t *testing.T) {
	srv := apitest.Start(t, apitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dyn, err := dynamic.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	widgets := dyn.Resource(apitest.Widgets).Namespace("ns")
	w := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "generation": int64(7)},
		"spec":     map[string]any{"size": int64(1)},
		"status":   map[string]any{"phase": "ignored on create"},
	}}
	created, err := widgets.Create(ctx, w, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if created.GetGeneration() != 1 {
		t.Fatalf("generation after create = %d, want 1", created.GetGeneration())
	}
	if _, found, _ := unstructured.NestedMap(created.Object, "status"); found {
		t.Fatalf("create kept a status on a resource with /status: %v", created.Object["status"])
	}

	if err := unstructured.SetNestedField(created.Object, "Ready", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	withStatus, err := widgets.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if withStatus.GetGeneration() != 1 {
		t.Fatalf("a status write moved generation to %d", withStatus.GetGeneration())
	}
	if err := unstructured.SetNestedField(withStatus.Object, int64(2), "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(withStatus.Object, "Lost", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	specChanged, err := widgets.Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	phase, _, _ := unstructured.NestedString(specChanged.Object, "status", "phase")
	if specChanged.GetGeneration() != 2 || phase != "Ready" {
		t.Fatalf("spec update: generation %d, status.phase %q; want 2 and the stored Ready", specChanged.GetGeneration(), phase)
	}

	applyBody := []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"applied"},"spec":{"size":3}}`)
	applied, err := widgets.Patch(ctx, "applied", types.ApplyPatchType, applyBody, metav1.PatchOptions{FieldManager: "applier"})
	if err != nil {
		t.Fatalf("apply creating a widget: %v", err)
	}
	if size, _, _ := unstructured.NestedInt64(applied.Object, "spec", "size"); size != 3 {
		t.Fatalf("applied widget has size %d", size)
	}
	if _, err := widgets.Patch(ctx, "applied", types.StrategicMergePatchType, []byte(`{"spec":{"size":4}}`), metav1.PatchOptions{}); !apierrors.IsUnsupportedMediaType(err) {
		t.Fatalf("strategic merge patch on a custom resource: err = %v, want UnsupportedMediaType", err)
	}

	strict := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "strict", "nmae": "typo"},
	}}
	_, err = widgets.Create(ctx, strict, metav1.CreateOptions{FieldValidation: metav1.FieldValidationStrict})
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "metadata.nmae"`) {
		t.Fatalf("strict create with an unknown metadata field: err = %v, want BadRequest naming metadata.nmae", err)
	}
	if _, err := widgets.Get(ctx, "strict", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create stored the object: %v", err)
	}
}

func hasManager(cm *corev1.ConfigMap, manager string, op metav1.ManagedFieldsOperationType) bool {
	for _, e := range cm.ManagedFields {
		if e.Manager == manager && e.Operation == op {
			return true
		}
	}
	return false
}
