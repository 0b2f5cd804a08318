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

func TestMetadataCodecDecodeOwnership(t *testing.T) {
	obj, err := metadataCodec{ownership: true}.Decode(widget)
	if err != nil {
		t.Fatal(err)
	}
	full, err := metadataCodec{}.Decode(widget)
	if err != nil {
		t.Fatal(err)
	}
	fm := full.(*metav1.PartialObjectMetadata).ObjectMeta
	want := metav1.ObjectMeta{Name: fm.Name, Namespace: fm.Namespace, UID: fm.UID, OwnerReferences: fm.OwnerReferences}
	if got := obj.(*metav1.PartialObjectMetadata); !reflect.DeepEqual(got.ObjectMeta, want) || len(want.OwnerReferences) != 1 || want.UID == "" {
		t.Errorf("decoded %+v, want %+v", got.ObjectMeta, want)
	}
	deleting := []byte(`{"metadata":{"name":"w","deletionTimestamp":"2026-11-29T12:00:00Z","finalizers":["a","b"],"resourceVersion":"7","labels":{"x":"y"}},"s\u0070ec":{}}`)
	obj, err = metadataCodec{ownership: true}.Decode(deleting)
	if err != nil {
		t.Fatal(err)
	}
	if m := obj.(*metav1.PartialObjectMetadata); m.DeletionTimestamp == nil || len(m.Finalizers) != 2 || m.ResourceVersion != "7" || m.Labels != nil {
		t.Errorf("decoded %+v, want its deletion, finalizers and resourceVersion, no labels", m.ObjectMeta)
	}
	if _, err := (metadataCodec{ownership: true}).Decode([]byte(`{"metadata":{"finalizers":"a"}}`)); err == nil {
		t.Error("finalizers that are a string decoded")
	}
}

// BenchmarkMetadataCodecDecode is what core pays to decode each change
// of a custom resource it watches for the garbage collector: all of its
// metadata, or only what ownership needs.
func BenchmarkMetadataCodecDecode(b *testing.B) {
	for name, c := range map[string]metadataCodec{"full": {}, "ownership": {ownership: true}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Decode(widget); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
