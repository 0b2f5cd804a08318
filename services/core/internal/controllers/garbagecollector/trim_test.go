package garbagecollector

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestTrimKeepsWhatTheGraphReads checks that trimming drops the metadata
// the graph does not use and that a node built from the trimmed object
// equals one built from the whole object.
func TestTrimKeepsWhatTheGraphReads(t *testing.T) {
	now := metav1.Now()
	yes := true
	full := &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "child", Namespace: "ns", UID: "u1", ResourceVersion: "42",
			Generation: 3, CreationTimestamp: now, DeletionTimestamp: &now,
			Labels:      map[string]string{"app": "x"},
			Annotations: map[string]string{"note": "large"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: "u0", BlockOwnerDeletion: &yes,
			}},
			Finalizers:    []string{metav1.FinalizerDeleteDependents},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
	}
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	want := newNode(gvr, "ConfigMap", full.DeepCopy())

	out, err := trim(full)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*metav1.PartialObjectMetadata)
	if got.Labels != nil || got.Annotations != nil || got.ManagedFields != nil || got.Generation != 0 || !got.CreationTimestamp.IsZero() {
		t.Errorf("trim kept metadata the graph does not read: %+v", got.ObjectMeta)
	}
	if got.ResourceVersion != "42" || got.Kind != "ConfigMap" {
		t.Errorf("trim dropped the resourceVersion or kind: %+v", got)
	}
	if diff := cmp.Diff(want, newNode(gvr, "ConfigMap", got), cmp.AllowUnexported(node{})); diff != "" {
		t.Errorf("node from the trimmed object differs (-whole +trimmed):\n%s", diff)
	}
	again, err := trim(got)
	if err != nil || !cmp.Equal(again, got) {
		t.Errorf("trim is not idempotent: %v %v", again, err)
	}
	if other, _ := trim("not metadata"); other != "not metadata" {
		t.Errorf("trim changed an object that is not metadata: %v", other)
	}
}
