package convert

import (
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/util/webhook"

	"kplane.dev/libs/apiserver/eventconv"
	"kplane.dev/proto/admission"
	"kplane.dev/services/admission/internal/review"
)

// maxDefinitions bounds the converters kept; past it they are all
// dropped and built again as writes need them.
const maxDefinitions = 1024

// Converters make the converter of each review. They are safe for
// concurrent use.
type Converters struct {
	factory *conversion.CRConverterFactory

	mu sync.Mutex
	// byCRD are the converters of custom resources, by CRD, built once
	// per generation of its spec: building one for a conversion webhook
	// makes an HTTP client.
	byCRD map[types.UID]crdConverter
}

type crdConverter struct {
	generation int64
	convertor  runtime.ObjectConvertor
}

// New makes Converters that reach conversion webhooks named by service
// through services.
func New(services webhook.ServiceResolver) (*Converters, error) {
	f, err := conversion.NewCRConverterFactory(services, func(r webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver { return r })
	if err != nil {
		return nil, fmt.Errorf("build the conversion webhook client: %w", err)
	}
	return &Converters{factory: f, byCRD: map[types.UID]crdConverter{}}, nil
}

// For returns the converter of r's objects; nil when r has no
// equivalents to convert them to.
func (c *Converters) For(r *admission.Review) (review.Converter, error) {
	if len(r.Equivalents) == 0 {
		return nil, nil
	}
	if r.Definition == nil {
		return builtin{}, nil
	}
	conv, err := c.crd(r.Definition)
	if err != nil {
		return nil, err
	}
	return customResources{conv}, nil
}

func (c *Converters) crd(crd *apiextensionsv1.CustomResourceDefinition) (runtime.ObjectConvertor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.byCRD[crd.UID]; ok && have.generation == crd.Generation {
		return have.convertor, nil
	}
	if crd.Spec.Conversion == nil {
		// The API server defaults a stored CRD's conversion to None;
		// kube's converter reads it unguarded.
		crd = crd.DeepCopy()
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	}
	safe, _, err := c.factory.NewConverter(crd)
	if err != nil {
		return nil, fmt.Errorf("build the converter of %s: %w", crd.Name, err)
	}
	if len(c.byCRD) >= maxDefinitions {
		clear(c.byCRD)
	}
	c.byCRD[crd.UID] = crdConverter{generation: crd.Generation, convertor: safe}
	return safe, nil
}

// customResources converts with kube's converter of one CRD.
type customResources struct{ conv runtime.ObjectConvertor }

func (c customResources) Convert(obj *unstructured.Unstructured, to schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	out, err := c.conv.ConvertToVersion(obj, to.GroupVersion())
	if err != nil {
		return nil, err
	}
	u, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("conversion to %v returned %T, not an unstructured object", to, out)
	}
	return u, nil
}

var (
	coreEvent   = corev1.SchemeGroupVersion.WithKind("Event")
	eventsEvent = eventsv1.SchemeGroupVersion.WithKind("Event")
)

// builtin converts the built-in kinds served in two versions: events.
type builtin struct{}

func (builtin) Convert(obj *unstructured.Unstructured, to schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	from := obj.GroupVersionKind()
	var out runtime.Object
	switch {
	case from == coreEvent && to == eventsEvent:
		ev := &corev1.Event{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ev); err != nil {
			return nil, fmt.Errorf("read the %v: %w", from, err)
		}
		out = eventconv.FromCore(ev)
	case from == eventsEvent && to == coreEvent:
		ev := &eventsv1.Event{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, ev); err != nil {
			return nil, fmt.Errorf("read the %v: %w", from, err)
		}
		out = eventconv.ToCore(ev)
	default:
		return nil, fmt.Errorf("unable to convert %v to %v: no conversion is known", from, to)
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, fmt.Errorf("write the %v: %w", to, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(to)
	return u, nil
}
