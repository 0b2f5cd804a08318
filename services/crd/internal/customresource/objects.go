package customresource

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
)

// Objects reads and writes one served version's objects. Objects are
// stored in the CRD's storage version: Encode converts to it, Decode
// converts back and applies the version's defaults, as kube reads custom
// resources from etcd.
type Objects struct {
	*objects.Unstructured
	v *version
}

var _ resource.Objects = (*Objects)(nil)

// Encode converts obj to the storage version and writes it as JSON.
func (o *Objects) Encode(obj runtime.Object) ([]byte, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("encode %T: not unstructured", obj)
	}
	if u.GroupVersionKind().GroupVersion() != o.v.storageGV {
		out, err := o.v.converter.ConvertToVersion(u.DeepCopy(), o.v.storageGV)
		if err != nil {
			return nil, fmt.Errorf("convert to the storage version %s: %w", o.v.storageGV, err)
		}
		obj = out
	}
	return o.Unstructured.Encode(obj)
}

// Decode reads a stored object in this version, its defaults applied.
func (o *Objects) Decode(data []byte) (runtime.Object, error) {
	obj, err := o.Unstructured.Decode(data)
	if err != nil {
		return nil, err
	}
	u := obj.(*unstructured.Unstructured)
	if u.GroupVersionKind().GroupVersion() != o.v.gvk.GroupVersion() {
		out, err := o.v.converter.ConvertToVersion(u, o.v.gvk.GroupVersion())
		if err != nil {
			return nil, fmt.Errorf("convert from %s to %s: %w", u.GetAPIVersion(), o.v.gvk.GroupVersion(), err)
		}
		if u, err = asUnstructured(out); err != nil {
			return nil, err
		}
	}
	o.v.applyDefaults(u)
	return u, nil
}

// DecodeRequest reads a request body as kube reads a custom resource:
// fields the schema does not know are dropped, and reported as unknown
// fields when the decoding is strict; defaults are applied.
func (o *Objects) DecodeRequest(data []byte, opts resource.DecodeOptions) (runtime.Object, error) {
	obj, err := o.Unstructured.DecodeRequest(data, opts)
	if obj == nil {
		return nil, err
	}
	var strict []error
	if err != nil {
		se, ok := runtime.AsStrictDecodingError(err)
		if !ok {
			return nil, err
		}
		strict = se.Errors()
	}
	u := obj.(*unstructured.Unstructured)
	if u.GroupVersionKind() == o.v.gvk {
		unknown, err := o.v.coerce(u, opts.Strict)
		if err != nil {
			return nil, err
		}
		for _, p := range unknown {
			strict = append(strict, fmt.Errorf("unknown field %q", p))
		}
		o.v.applyDefaults(u)
	}
	if len(strict) > 0 {
		return u, runtime.NewStrictDecodingError(strict)
	}
	return u, nil
}

func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("conversion returned %T, not an unstructured object", obj)
	}
	return u, nil
}
