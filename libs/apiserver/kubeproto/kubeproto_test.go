package kubeproto_test

import (
	"bytes"
	"io"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/client-go/kubernetes/scheme"

	"kplane.dev/libs/apiserver/kubeproto"
)

// TestDecodesAsClientGo reads what Encode and WriteEvent write with
// client-go's own protobuf decoders: an object, and a watch stream of
// length-delimited events.
func TestDecodesAsClientGo(t *testing.T) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", ResourceVersion: "7"},
		Data:       map[string]string{"k": "v"},
	}
	data, err := kubeproto.Encode(cm)
	if err != nil {
		t.Fatal(err)
	}
	decoder := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	got, _, err := decoder.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := got.(*corev1.ConfigMap); !ok || c.Name != "cm" || c.Data["k"] != "v" || c.ResourceVersion != "7" {
		t.Fatalf("decoded %#v", got)
	}

	var stream bytes.Buffer
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}
	for _, ev := range []struct {
		typ string
		obj runtime.Object
	}{{"ADDED", cm}, {"ERROR", gone}} {
		raw, err := kubeproto.Encode(ev.obj)
		if err != nil {
			t.Fatal(err)
		}
		frame, err := kubeproto.EventFrame(ev.typ, raw)
		if err != nil {
			t.Fatal(err)
		}
		stream.Write(frame)
	}
	raw := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	frames := protobuf.LengthDelimitedFramer.NewFrameReader(io.NopCloser(&stream))
	events := streaming.NewDecoder(frames, raw)
	for _, want := range []struct {
		typ  string
		kind string
	}{{"ADDED", "ConfigMap"}, {"ERROR", "Status"}} {
		ev := &metav1.WatchEvent{}
		if _, _, err := events.Decode(nil, ev); err != nil {
			t.Fatalf("read %s event: %v", want.typ, err)
		}
		obj, _, err := decoder.Decode(ev.Object.Raw, nil, nil)
		if err != nil {
			t.Fatalf("read %s event's object: %v", want.typ, err)
		}
		if ev.Type != want.typ || obj.GetObjectKind().GroupVersionKind().Kind != want.kind {
			t.Errorf("event %s of %T, want %s of %s", ev.Type, obj, want.typ, want.kind)
		}
	}
}

// TestRefusesWhatCannotBeEncoded: an object without apiVersion and kind
// cannot name itself in the envelope, and an unstructured object has no
// protobuf code.
func TestRefusesWhatCannotBeEncoded(t *testing.T) {
	if _, err := kubeproto.Encode(&corev1.ConfigMap{}); err == nil {
		t.Error("encoded an object without apiVersion and kind")
	}
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget"}}
	if _, err := kubeproto.Encode(u); err == nil {
		t.Error("encoded an unstructured object")
	}
}
