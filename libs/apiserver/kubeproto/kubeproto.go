package kubeproto

import (
	"bytes"
	"encoding/binary"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// Media types of protobuf responses.
const (
	MediaType       = runtime.ContentTypeProtobuf
	StreamMediaType = MediaType + ";stream=watch"
)

// serializer writes the envelope; encoding needs neither a creater nor a
// typer: the kind comes from the object's own apiVersion and kind.
var serializer = protobuf.NewSerializer(nil, nil)

// Encode returns obj in protobuf. obj must carry its apiVersion and kind,
// which the envelope names.
func Encode(obj runtime.Object) ([]byte, error) {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		return nil, fmt.Errorf("encode %T as protobuf: the object has no apiVersion and kind", obj)
	}
	var buf bytes.Buffer
	if err := serializer.EncodeWithAllocator(obj, &buf, &runtime.SimpleAllocator{}); err != nil {
		return nil, fmt.Errorf("encode %T as protobuf: %w", obj, err)
	}
	return buf.Bytes(), nil
}

// EventFrame is one frame of a protobuf watch stream: a WatchEvent of
// type typ whose object is raw, an object encoded by Encode, preceded by
// its length as four big-endian bytes, as client-go's length-delimited
// framer reads it. The object comes encoded so that the watches sending
// it share its encoding.
func EventFrame(typ string, raw []byte) ([]byte, error) {
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	frame := make([]byte, 4+ev.Size())
	n, err := ev.MarshalToSizedBuffer(frame[4:])
	if err != nil {
		return nil, fmt.Errorf("encode %s watch event: %w", typ, err)
	}
	binary.BigEndian.PutUint32(frame, uint32(n))
	return frame[:4+n], nil
}
