package review

import (
	"fmt"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
)

// Target is what a write is matched and seen as: its own resource and
// kind, or one of its equivalents'.
type Target struct {
	Resource schema.GroupVersionResource
	Kind     schema.GroupVersionKind
}

// Converter converts a write's objects to an equivalent kind.
type Converter interface {
	Convert(obj *unstructured.Unstructured, to schema.GroupVersionKind) (*unstructured.Unstructured, error)
}

// Own is a's own resource and kind.
func (a *Attributes) Own() Target {
	return Target{Resource: schema.GroupVersionResource(a.Request.Resource), Kind: schema.GroupVersionKind(a.Request.Kind)}
}

// Equivalent says whether p, a webhook's or policy's matchPolicy, matches
// equivalent resources too: Equivalent, which the API server defaults
// it to, does.
func Equivalent(p *admissionregistrationv1.MatchPolicyType) bool {
	return p != nil && *p == admissionregistrationv1.Equivalent
}

// Match finds what rules match a as, in kube's order: a's own resource
// against every rule, then, when equivalent is set, each rule in turn
// against each of a's equivalents. match says whether rule i matches a
// write to resource, all else about the write being a's.
func (a *Attributes) Match(rules int, equivalent bool, match func(i int, resource schema.GroupVersionResource) bool) (Target, bool) {
	own := a.Own()
	for i := range rules {
		if match(i, own.Resource) {
			return own, true
		}
	}
	if !equivalent {
		return Target{}, false
	}
	for i := range rules {
		for _, e := range a.Equivalents {
			if match(i, e.Resource) {
				return e, true
			}
		}
	}
	return Target{}, false
}

// As returns a seen as t, as a webhook or policy that matched t sees it:
// its objects converted to t's kind and its kind and resource t's, its
// request kind and resource still those the client addressed. It is a
// itself when t is its own. Conversions are made once per Attributes.
func (a *Attributes) As(t Target) (*Attributes, error) {
	if t == a.Own() {
		return a, nil
	}
	if a.views == nil {
		return a.convert(t)
	}
	a.views.mu.Lock()
	defer a.views.mu.Unlock()
	if v, ok := a.views.byKind[t]; ok {
		return v, nil
	}
	v, err := a.convert(t)
	if err != nil {
		return nil, err
	}
	a.views.byKind[t] = v
	return v, nil
}

func (a *Attributes) convert(t Target) (*Attributes, error) {
	r := *a.Request
	r.Kind, r.Resource = metav1.GroupVersionKind(t.Kind), metav1.GroupVersionResource(t.Resource)
	v := &Attributes{Request: &r, Equivalents: a.Equivalents, Converter: a.Converter}
	var err error
	if v.Object, err = a.ConvertTo(a.Object, t.Kind); err != nil {
		return nil, err
	}
	if v.OldObject, err = a.ConvertTo(a.OldObject, t.Kind); err != nil {
		return nil, err
	}
	return v, nil
}

// ConvertTo converts obj, one of a's objects or a step's change of it,
// to kind. A failure is kube's internal error, whatever the step's
// failure policy: the write cannot be seen as the step asked.
func (a *Attributes) ConvertTo(obj *unstructured.Unstructured, kind schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if obj == nil || obj.GroupVersionKind() == kind {
		return obj, nil
	}
	if a.Converter == nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("unable to convert %v to %v: no conversion is known", obj.GroupVersionKind(), kind))
	}
	out, err := a.Converter.Convert(obj, kind)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// views are an Attributes' conversions to its equivalents.
type views struct {
	mu     sync.Mutex
	byKind map[Target]*Attributes
}

// WithObject returns a with obj as its object: the write as a step
// before left it.
func (a *Attributes) WithObject(obj *unstructured.Unstructured) *Attributes {
	return &Attributes{Request: a.Request, Object: obj, OldObject: a.OldObject, Equivalents: a.Equivalents, Converter: a.Converter, views: newViews(a.Equivalents)}
}

// New returns the attributes of a write, able to convert its objects to
// their equivalents with c.
func New(r *admissionv1.AdmissionRequest, obj, old *unstructured.Unstructured, equivalents []Target, c Converter) *Attributes {
	return &Attributes{Request: r, Object: obj, OldObject: old, Equivalents: equivalents, Converter: c, views: newViews(equivalents)}
}

func newViews(equivalents []Target) *views {
	if len(equivalents) == 0 {
		return nil
	}
	return &views{byKind: map[Target]*Attributes{}}
}

// WithResource is attrs addressed to resource, as kube's rule matcher
// reads a write it matches against an equivalent resource.
func WithResource(attrs admission.Attributes, resource schema.GroupVersionResource) admission.Attributes {
	return withResource{Attributes: attrs, resource: resource}
}

type withResource struct {
	admission.Attributes
	resource schema.GroupVersionResource
}

func (w withResource) GetResource() schema.GroupVersionResource { return w.resource }
