package review

import (
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
)

// Attributes are one write as the admission steps see it.
type Attributes struct {
	// Request carries everything but the objects: uid, kind, resource,
	// subresource, request kind and resource, name, namespace,
	// operation, user, dryRun and options. Its Object and OldObject are
	// ignored; the ones below are what the steps read.
	Request *admissionv1.AdmissionRequest
	// Object is the object being written; nil for a delete.
	Object *unstructured.Unstructured
	// OldObject is the object being replaced; nil for a create.
	OldObject *unstructured.Unstructured
	// Equivalents are the other resources and kinds the objects are
	// served as, which matchPolicy Equivalent matches; Converter converts
	// the objects to them.
	Equivalents []Target
	Converter   Converter

	// views caches the conversions to equivalents; nil when there are
	// none, or for attributes built as literals, which convert each time.
	views *views
}

// Result is what the steps of one phase added to a write they let
// through.
type Result struct {
	// Object is the object after the mutating steps; nil when they left
	// it unchanged, and always nil from validation.
	Object           *unstructured.Unstructured
	Warnings         []string
	AuditAnnotations map[string]string
}

// Versioned returns a's attributes as kube's admission and CEL libraries
// read them.
func (a *Attributes) Versioned() (*admission.VersionedAttributes, error) {
	r := a.Request
	var obj, old, options runtime.Object
	if a.Object != nil {
		obj = a.Object
	}
	if a.OldObject != nil {
		old = a.OldObject
	}
	if len(r.Options.Raw) > 0 {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(r.Options.Raw); err != nil {
			return nil, fmt.Errorf("decoding the request's options: %w", err)
		}
		options = u
	}
	extra := map[string][]string{}
	for k, v := range r.UserInfo.Extra {
		extra[k] = v
	}
	u := &user.DefaultInfo{Name: r.UserInfo.Username, UID: r.UserInfo.UID, Groups: r.UserInfo.Groups, Extra: extra}
	// The attributes are the write as the client made it; only the
	// versioned kind and objects are those of an equivalent a is seen
	// as, as in kube's VersionedAttributes.
	kind, resource := schema.GroupVersionKind(r.Kind), schema.GroupVersionResource(r.Resource)
	if r.RequestKind != nil && r.RequestResource != nil {
		kind, resource = schema.GroupVersionKind(*r.RequestKind), schema.GroupVersionResource(*r.RequestResource)
	}
	attrs := admission.NewAttributesRecord(obj, old, kind, r.Namespace, r.Name, resource,
		r.SubResource, admission.Operation(r.Operation), options, r.DryRun != nil && *r.DryRun, u)
	return &admission.VersionedAttributes{Attributes: attrs, VersionedKind: schema.GroupVersionKind(r.Kind), VersionedObject: admission.NewLazyObject(obj), VersionedOldObject: admission.NewLazyObject(old)}, nil
}
