package objects_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"kplane.dev/libs/apiserver/resource"
)

// storedConfigMap is a ConfigMap as the store writes it: about 1 KiB of
// data and the managedFields a server-side create leaves.
func storedConfigMap(tb testing.TB, o resource.Objects) []byte {
	tb.Helper()
	data := map[string]string{}
	for i := range 8 {
		data[fmt.Sprintf("key-%d", i)] = strings.Repeat("v", 120)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Name: "bench", Namespace: "ns", UID: "6a0e1f4c-3d2b-4c1a-9e8f-7b6a5c4d3e2f",
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)),
			Labels:            map[string]string{"app": "bench", "tier": "config"},
			Annotations:       map[string]string{"example.com/owner": "team-a"},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
				Time: &metav1.Time{Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:data":{".":{},"f:key-0":{},"f:key-1":{},"f:key-2":{},"f:key-3":{},"f:key-4":{},"f:key-5":{},"f:key-6":{},"f:key-7":{}},"f:metadata":{"f:labels":{".":{},"f:app":{},"f:tier":{}}}}`)},
			}},
		},
		Data: data,
	}
	b, err := o.Encode(cm)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// storedWidget is a custom resource as the store writes it, with integers,
// floats, lists and nested objects in its spec and status.
func storedWidget(tb testing.TB, o resource.Objects) []byte {
	tb.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1",
		"kind":       "Widget",
		"metadata": map[string]any{
			"name": "bench", "namespace": "ns", "uid": "6a0e1f4c-3d2b-4c1a-9e8f-7b6a5c4d3e2f",
			"creationTimestamp": "2026-01-02T03:04:05Z", "generation": int64(3),
			"labels": map[string]any{"app": "bench"},
			"managedFields": []any{map[string]any{
				"manager": "kubectl-create", "operation": "Update", "apiVersion": "example.com/v1",
				"time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
				"fieldsV1": map[string]any{"f:spec": map[string]any{".": map[string]any{}, "f:replicas": map[string]any{}, "f:ports": map[string]any{}}},
			}},
		},
		"spec": map[string]any{
			"replicas": int64(3), "ratio": 0.75, "big": int64(1) << 60,
			"ports":    []any{int64(80), int64(443), int64(8080)},
			"template": map[string]any{"image": "example.com/widget:1.2.3", "args": []any{"--verbose", "--port=8080"}, "env": map[string]any{"A": "1", "B": strings.Repeat("x", 200)}},
		},
		"status": map[string]any{"ready": true, "observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}}},
	}}
	b, err := o.Encode(u)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkDecodeStored decodes stored bytes as the etcd3 store does after
// every write, read and watch event.
func BenchmarkDecodeStored(b *testing.B) {
	cases := []struct {
		name   string
		o      resource.Objects
		stored func(testing.TB, resource.Objects) []byte
	}{
		{"typed", typedConfigMaps(b), storedConfigMap},
		{"unstructured", widgets(), storedWidget},
	}
	for _, c := range cases {
		data := c.stored(b, c.o)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.o.Decode(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeRequest decodes a create's JSON body as core does, with
// client-go's default field validation (warn: strict) and without.
func BenchmarkDecodeRequest(b *testing.B) {
	typed, custom := typedConfigMaps(b), widgets()
	for _, kind := range []struct {
		name string
		o    resource.Objects
		data []byte
	}{
		{"configmap", typed, storedConfigMap(b, typed)},
		{"widget", custom, storedWidget(b, custom)},
	} {
		for _, strict := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/strict=%v", kind.name, strict), func(b *testing.B) {
				b.SetBytes(int64(len(kind.data)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := kind.o.DecodeRequest(kind.data, resource.DecodeOptions{Strict: strict}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
