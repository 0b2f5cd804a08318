package server

import (
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// widget is a stored custom resource as crd writes it: metadata with
// managed fields, then a spec of about 1 KiB.
var widget = []byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"creationTimestamp":"2026-11-29T12:00:00Z","generation":3,"labels":{"app":"load"},"managedFields":[{"apiVersion":"example.com/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:data":{}}},"manager":"kplane-load","operation":"Update","time":"2026-11-29T12:00:00Z"}],"name":"w-1","namespace":"load","ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":"7d3c1c7e-4f4e-4f5c-9a55-0a1f8d1e2b3c","blockOwnerDeletion":true}],"uid":"0b9a5a40-6a0e-4b59-8a54-2f0e7a9b8c1d"},"spec":{"data":"` + strings.Repeat("x", 1024) + `"}}`)

func TestMetadataCodecDecode(t *testing.T) {
	tests := map[string][]byte{
		"a custom resource": widget,
		// Read through the whole decode: a key with an escape.
		"escaped key": []byte(`{"spec":{"d\u0061ta":1},"metadata":{"name":"w-1","namespace":"load"}}`),
		// Decoded as a case-sensitive decode would: Metadata is not it,
		// a second metadata adds to the first.
		"repeated": []byte(`{"Metadata":{"name":"no"},"metadata":{"name":"w-1"},"metadata":{"namespace":"load"}}`),
	}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			obj, err := metadataCodec{}.Decode(data)
			if err != nil {
				t.Fatal(err)
			}
			m := obj.(*metav1.PartialObjectMetadata)
			if m.Name != "w-1" || m.Namespace != "load" || !reflect.DeepEqual(m.TypeMeta, metav1.TypeMeta{}) {
				t.Errorf("decoded %+v, want w-1 in load and no type", m)
			}
		})
	}
	if _, err := (metadataCodec{}).Decode([]byte(`{"metadata":{"name":7}}`)); err == nil {
		t.Error("a name that is a number decoded")
	}
	obj, err := metadataCodec{}.Decode(widget)
	if err != nil {
		t.Fatal(err)
	}
	if m := obj.(*metav1.PartialObjectMetadata); len(m.ManagedFields) != 1 || len(m.OwnerReferences) != 1 || m.Generation != 3 {
		t.Errorf("decoded %+v, want its managed fields, owner and generation", m)
	}
}

// BenchmarkMetadataCodecDecode is what core pays to decode each change
// of a custom resource it watches for the garbage collector.
func BenchmarkMetadataCodecDecode(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := (metadataCodec{}).Decode(widget); err != nil {
			b.Fatal(err)
		}
	}
}
