package objects

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	sigsjson "sigs.k8s.io/json"

	"kplane.dev/libs/apiserver/resource"
)

// serializers are the four JSON/YAML readers a request may need, plus the
// writer; all are safe for concurrent use.
type serializers struct {
	json, jsonStrict, yaml, yamlStrict, encoder *json.Serializer
}

func newSerializers(creater runtime.ObjectCreater, typer runtime.ObjectTyper) serializers {
	mk := func(o json.SerializerOptions) *json.Serializer {
		return json.NewSerializerWithOptions(json.DefaultMetaFactory, creater, typer, o)
	}
	return serializers{
		json:       mk(json.SerializerOptions{}),
		jsonStrict: mk(json.SerializerOptions{Strict: true}),
		yaml:       mk(json.SerializerOptions{Yaml: true}),
		yamlStrict: mk(json.SerializerOptions{Yaml: true, Strict: true}),
		encoder:    mk(json.SerializerOptions{}),
	}
}

func (s serializers) reader(opts resource.DecodeOptions) *json.Serializer {
	switch {
	case opts.YAML && opts.Strict:
		return s.yamlStrict
	case opts.YAML:
		return s.yaml
	case opts.Strict:
		return s.jsonStrict
	default:
		return s.json
	}
}

func (s serializers) encode(obj runtime.Object) ([]byte, error) {
	var buf bytes.Buffer
	if err := s.encoder.Encode(obj, &buf); err != nil {
		return nil, err
	}
	// The serializer ends each document with a newline; stored bytes and
	// the no-op update check compare without it.
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Typed handles one kind of a runtime.Scheme.
type Typed struct {
	scheme   *runtime.Scheme
	gvk      schema.GroupVersionKind
	listGVK  schema.GroupVersionKind
	s        serializers
	protobuf *protobuf.Serializer
	decodeTo schema.GroupVersionKind
}

var _ resource.Objects = (*Typed)(nil)

// NewTyped returns the Objects of kind gvk, whose list kind is listKind;
// both must be registered in scheme. A kind that is never stored, such as
// a review, has no list: listKind "" makes NewList return nil.
func NewTyped(scheme *runtime.Scheme, gvk schema.GroupVersionKind, listKind string) (*Typed, error) {
	kinds := []schema.GroupVersionKind{gvk}
	var listGVK schema.GroupVersionKind
	if listKind != "" {
		listGVK = gvk.GroupVersion().WithKind(listKind)
		kinds = append(kinds, listGVK)
	}
	for _, k := range kinds {
		if !scheme.Recognizes(k) {
			return nil, fmt.Errorf("kind %s is not registered in the scheme", k)
		}
	}
	return &Typed{
		scheme:   scheme,
		gvk:      gvk,
		listGVK:  listGVK,
		s:        newSerializers(scheme, scheme),
		protobuf: protobuf.NewSerializer(scheme, scheme),
		decodeTo: gvk,
	}, nil
}

// New returns an empty object of the kind with apiVersion and kind set.
func (t *Typed) New() runtime.Object { return t.newOf(t.gvk) }

// NewList returns an empty list with apiVersion and kind set, or nil for
// a kind without a list.
func (t *Typed) NewList() runtime.Object {
	if t.listGVK.Empty() {
		return nil
	}
	return t.newOf(t.listGVK)
}

func (t *Typed) newOf(gvk schema.GroupVersionKind) runtime.Object {
	obj, err := t.scheme.New(gvk)
	if err != nil {
		// NewTyped checked that the scheme knows both kinds.
		panic(fmt.Sprintf("scheme lost kind %s: %v", gvk, err))
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// Encode writes obj as JSON with its apiVersion and kind.
func (t *Typed) Encode(obj runtime.Object) ([]byte, error) {
	obj.GetObjectKind().SetGroupVersionKind(t.gvk)
	return t.s.encode(obj)
}

// Decode reads stored JSON into a new object.
func (t *Typed) Decode(data []byte) (runtime.Object, error) {
	if obj, ok := t.decodeStored(data); ok {
		return obj, nil
	}
	return t.decode(data, t.s.json)
}

// DecodeRequest reads a request body into a new object. A body of another
// kind still decodes into this kind's struct, so the caller can report the
// mismatch by the apiVersion and kind the body named.
func (t *Typed) DecodeRequest(data []byte, opts resource.DecodeOptions) (runtime.Object, error) {
	if opts.Protobuf {
		return t.decode(data, t.protobuf)
	}
	if !opts.YAML {
		if obj, ok, err := t.decodeRequestJSON(data, opts.Strict); ok {
			return obj, err
		}
	}
	return t.decode(data, t.s.reader(opts))
}

// MediaTypes are JSON, YAML and protobuf: built-in kinds have generated
// protobuf code.
func (t *Typed) MediaTypes() []string {
	return []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML, runtime.ContentTypeProtobuf}
}

func (t *Typed) decode(data []byte, s runtime.Decoder) (runtime.Object, error) {
	into := t.New()
	obj, gvk, err := s.Decode(data, &t.decodeTo, into)
	if err != nil && !runtime.IsStrictDecodingError(err) {
		return nil, err
	}
	if obj != into {
		// The body named another registered kind; keep what it said
		// so the caller can reject the mismatch.
		return obj, err
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	return obj, err
}

// Unstructured handles one kind as *unstructured.Unstructured.
type Unstructured struct {
	gvk     schema.GroupVersionKind
	listGVK schema.GroupVersionKind
	s       serializers
}

var _ resource.Objects = (*Unstructured)(nil)

// NewUnstructured returns the Objects of kind gvk and its list kind.
func NewUnstructured(gvk schema.GroupVersionKind, listKind string) *Unstructured {
	return &Unstructured{
		gvk:     gvk,
		listGVK: gvk.GroupVersion().WithKind(listKind),
		s:       newSerializers(unstructuredScheme{}, unstructuredScheme{}),
	}
}

// New returns an empty object with apiVersion and kind set.
func (u *Unstructured) New() runtime.Object {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(u.gvk)
	return obj
}

// NewList returns an empty list with apiVersion and kind set.
func (u *Unstructured) NewList() runtime.Object {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(u.listGVK)
	return l
}

// Encode writes obj as JSON with its apiVersion and kind.
func (u *Unstructured) Encode(obj runtime.Object) ([]byte, error) {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj.GetObjectKind().SetGroupVersionKind(u.gvk)
	}
	return JSON(obj)
}

// Decode reads stored JSON into a new object.
func (u *Unstructured) Decode(data []byte) (runtime.Object, error) {
	if obj, ok := u.decodeStored(data); ok {
		return obj, nil
	}
	return u.decode(data, u.s.json)
}

// DecodeRequest reads a request body into a new object.
func (u *Unstructured) DecodeRequest(data []byte, opts resource.DecodeOptions) (runtime.Object, error) {
	if opts.Protobuf {
		return nil, fmt.Errorf("%s cannot be read from protobuf", u.gvk.Kind)
	}
	return u.decodeRequest(data, opts)
}

// MediaTypes are JSON and YAML: custom resources have no protobuf form.
func (u *Unstructured) MediaTypes() []string {
	return []string{runtime.ContentTypeJSON, runtime.ContentTypeYAML}
}

func (u *Unstructured) decode(data []byte, s *json.Serializer) (runtime.Object, error) {
	obj, _, err := s.Decode(data, &u.gvk, nil)
	if err != nil && !runtime.IsStrictDecodingError(err) {
		return nil, err
	}
	return obj, err
}

// decodeBody is what the serializer opts names decodes of a request
// body, in one pass for JSON where decodeRequestJSON can take it.
func (u *Unstructured) decodeBody(data []byte, opts resource.DecodeOptions) (runtime.Object, error) {
	if !opts.YAML {
		if obj, ok, err := u.decodeRequestJSON(data, opts.Strict); ok {
			return obj, err
		}
	}
	return u.decode(data, u.s.reader(opts))
}

// decodeRequest reads a request body and, as kube-apiserver does for
// custom resources, keeps only the fields of ObjectMeta in its metadata:
// unknown ones are dropped, and reported when strict.
func (u *Unstructured) decodeRequest(data []byte, opts resource.DecodeOptions) (runtime.Object, error) {
	strict := opts.Strict
	obj, err := u.decodeBody(data, opts)
	if obj == nil {
		return nil, err
	}
	var strictErrs []error
	if se, ok := runtime.AsStrictDecodingError(err); ok {
		strictErrs = se.Errors()
	}
	unknown, perr := pruneMetadata(obj.(*unstructured.Unstructured))
	if perr != nil {
		return nil, perr
	}
	if strict {
		strictErrs = append(strictErrs, unknown...)
	}
	if len(strictErrs) != 0 {
		return obj, runtime.NewStrictDecodingError(strictErrs)
	}
	return obj, nil
}

// pruneMetadata replaces u's metadata by what ObjectMeta holds of it and
// returns an "unknown field" error for each field it dropped.
func pruneMetadata(u *unstructured.Unstructured) ([]error, error) {
	raw, ok := u.Object["metadata"]
	if !ok {
		return nil, nil
	}
	data, err := stdjson.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("encode metadata: %w", err)
	}
	var om metav1.ObjectMeta
	unknown, err := sigsjson.UnmarshalStrict(data, &om, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	for _, e := range unknown {
		if fe, ok := e.(sigsjson.FieldError); ok {
			fe.SetFieldPath("metadata." + fe.FieldPath())
		}
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&om)
	if err != nil {
		return nil, fmt.Errorf("convert metadata: %w", err)
	}
	// A zero creationTimestamp converts to null; kube leaves it out.
	if ts, ok := m["creationTimestamp"]; ok && ts == nil {
		delete(m, "creationTimestamp")
	}
	u.Object["metadata"] = m
	return unknown, nil
}

// unstructuredScheme creates and types unstructured objects of any kind,
// which is what the JSON serializer needs to read and write them.
type unstructuredScheme struct{}

func (unstructuredScheme) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	return obj, nil
}

func (unstructuredScheme) ObjectKinds(obj runtime.Object) ([]schema.GroupVersionKind, bool, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	if gvk.Kind == "" {
		return nil, false, runtime.NewMissingKindErr("object has no kind")
	}
	return []schema.GroupVersionKind{gvk}, false, nil
}

func (unstructuredScheme) Recognizes(schema.GroupVersionKind) bool { return true }
