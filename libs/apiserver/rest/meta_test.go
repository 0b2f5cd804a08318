package rest

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// An update that changes nothing but managedFields timestamps keeps the
// stored ones; one that changes anything else keeps its own, and neither
// changes the updated object's resourceVersion.
func TestKeepManagedFieldsTimestamps(t *testing.T) {
	entry := func(at time.Time) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{
			Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
			Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{"f:k":{}}}`)},
		}
	}
	then, now := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	configMap := func(rv, value string, at time.Time) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "a", ResourceVersion: rv, ManagedFields: []metav1.ManagedFieldsEntry{entry(at)}},
			Data:       map[string]string{"k": value},
		}
	}
	unstructuredOf := func(cm *corev1.ConfigMap) runtime.Object {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cm)
		if err != nil {
			t.Fatal(err)
		}
		return &unstructured.Unstructured{Object: m}
	}
	typed := func(cm *corev1.ConfigMap) runtime.Object { return cm }
	for name, form := range map[string]func(*corev1.ConfigMap) runtime.Object{"typed": typed, "unstructured": unstructuredOf} {
		for _, tc := range []struct {
			value    string
			wantTime time.Time
		}{
			{"v", then},
			{"changed", now},
		} {
			t.Run(name+"/"+tc.value, func(t *testing.T) {
				old := form(configMap("5", "v", then))
				obj := form(configMap("", tc.value, now))
				keepManagedFieldsTimestamps(obj, old)
				m := accessor(t, obj)
				if got := m.GetManagedFields(); len(got) != 1 || !got[0].Time.Time.Equal(tc.wantTime) {
					t.Fatalf("managedFields %v, want one entry of %v", got, tc.wantTime)
				}
				if m.GetResourceVersion() != "" {
					t.Fatalf("resourceVersion %q, want it left empty", m.GetResourceVersion())
				}
				if got := accessor(t, old).GetManagedFields(); len(got) != 1 || !got[0].Time.Time.Equal(then) {
					t.Fatalf("stored managedFields changed to %v", got)
				}
			})
		}
	}
}

func accessor(t *testing.T, obj runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
