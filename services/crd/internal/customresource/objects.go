package customresource

import (
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

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

var (
	_ resource.Objects          = (*Objects)(nil)
	_ resource.VersionConverter = (*Objects)(nil)
)

// Encode converts obj to the storage version and writes it as JSON.
func (o *Objects) Encode(obj runtime.Object) ([]byte, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("encode %T: not unstructured", obj)
	}
	if u.GroupVersionKind().GroupVersion() != o.v.storageGV {
		out, err := o.v.converter.ConvertToVersion(u.DeepCopy(), o.v.storageGV)
		if err != nil {
			return nil, conversionFailed(err)
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
			return nil, conversionFailed(err)
		}
		if u, err = asUnstructured(out); err != nil {
			return nil, err
		}
	}
	o.v.applyDefaults(u)
	return u, nil
}

// ConvertToVersion converts obj to version gv of the CRD, as the field
// managers do to read managedFields entries recorded through gv.
func (o *Objects) ConvertToVersion(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	// kube's converter rewrites its input in place (conversion None
	// sets the apiVersion), and obj is the caller's, such as the stored
	// object a patch applies to.
	out, err := o.v.converter.ConvertToVersion(obj.DeepCopyObject(), gv)
	if err != nil {
		return nil, fmt.Errorf("convert %s to %s: %w", obj.GetObjectKind().GroupVersionKind(), gv, err)
	}
	return out, nil
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

// conversionFailed is kube-apiserver's answer to a failed conversion
// between the served and the storage version: the converter's error is
// not an API status, so kube answers it as a 500 of unknown reason with
// the converter's message as it is (clients and users match on it, e.g.
// "conversion webhook for <gvk> failed: ..."), whatever layer it crossed.
func conversionFailed(err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Reason:  metav1.StatusReasonUnknown,
		Message: err.Error(),
	}}
}

func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("conversion returned %T, not an unstructured object", obj)
	}
	return u, nil
}
