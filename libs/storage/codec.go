package storage

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// Codec turns objects into the bytes stored in etcd and back. It is the one
// seam where the encoding lives: JSON today, protobuf for built-in types
// later without touching a store.
type Codec interface {
	// Encode serializes obj, apiVersion and kind included. Stores clear
	// metadata.resourceVersion before encoding: the revision is etcd's.
	Encode(obj runtime.Object) ([]byte, error)
	// Decode returns a new object from data.
	Decode(data []byte) (runtime.Object, error)
}
