package objects

import (
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/resource"
)

// requestCases are JSON bodies DecodeRequest may meet, and whether its one
// pass may take them; beside them, the stored cases' neighbours.
var requestCases = []requestCase{
	{name: "as client-go sends", onePass: true,
		body: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","creationTimestamp":null},"data":{"k":"v"}}`},
	{name: "no apiVersion or kind", onePass: true, body: `{"metadata":{"name":"a"},"data":{"k":"v"}}`},
	{name: "kind only", onePass: true, body: `{"kind":"ConfigMap","metadata":{"name":"a"}}`},
	{name: "apiVersion only", onePass: true, body: `{"apiVersion":"v1","metadata":{"name":"a"}}`},
	{name: "null kind", onePass: true, body: `{"kind":null,"apiVersion":"v1"}`},
	{name: "unknown and duplicate fields", onePass: true,
		body: `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","name":"b","nam":"c"},"dta":{}}`},
	{name: "another kind", body: `{"kind":"Secret","apiVersion":"v1","metadata":{"name":"a"}}`},
	{name: "another version", body: `{"kind":"ConfigMap","apiVersion":"v2","metadata":{"name":"a"}}`},
	{name: "another group", body: `{"kind":"ConfigMap","apiVersion":"example.com/v1"}`},
	{name: "group without version", body: `{"kind":"ConfigMap","apiVersion":"example.com/"}`},
	{name: "apiVersion that does not parse", body: `{"kind":"ConfigMap","apiVersion":"a/b/c"}`},
	{name: "apiVersion not a string", body: `{"kind":"ConfigMap","apiVersion":1}`},
	{name: "case variant kind", body: `{"kind":"ConfigMap","apiVersion":"v1","KIND":"Secret"}`},
	{name: "duplicate kind", body: `{"kind":"Secret","kind":"ConfigMap","apiVersion":"v1"}`},
	{name: "wrong type", body: `{"kind":"ConfigMap","apiVersion":"v1","data":{"k":5}}`},
	{name: "malformed", body: `{"kind":"ConfigMap",`},
	{name: "not an object", body: `[]`},
	{name: "null", body: `null`},
}

// requestCase is a JSON body, and whether a one pass may take it.
type requestCase struct {
	name, body string
	onePass    bool
}

// checkRequestCases runs same on each case's body, strict and not, and
// checks that onePass takes it where it should.
func checkRequestCases(t *testing.T, cases []requestCase, same func(t *testing.T, body []byte, strict bool), onePass func(body []byte, strict bool) (runtime.Object, bool, error)) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, strict := range []bool{false, true} {
				same(t, []byte(tc.body), strict)
				if _, ok, _ := onePass([]byte(tc.body), strict); ok != tc.onePass {
					t.Fatalf("strict %v: one pass taken %v, want %v", strict, ok, tc.onePass)
				}
			}
		})
	}
}

func newConfigMapObjects(tb testing.TB) *Typed {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	typed, err := NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		tb.Fatal(err)
	}
	return typed
}

// sameRequestAsSerializer fails t unless DecodeRequest returns for a JSON
// body exactly what the serializer alone returns, strict or not.
func sameRequestAsSerializer(t *testing.T, typed *Typed, body []byte, strict bool) {
	t.Helper()
	sameDecode(t, body, strict, typed.DecodeRequest, func(body []byte, opts resource.DecodeOptions) (runtime.Object, error) {
		return typed.decode(body, typed.s.reader(opts))
	})
}

// sameDecode fails t unless got decodes body as want does, object and
// error.
func sameDecode(t *testing.T, body []byte, strict bool, got, want func([]byte, resource.DecodeOptions) (runtime.Object, error)) {
	t.Helper()
	opts := resource.DecodeOptions{Strict: strict}
	gotObj, gotErr := got(body, opts)
	wantObj, wantErr := want(body, opts)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("decode %q (strict %v): err %v, the serializer's %v", body, strict, gotErr, wantErr)
	}
	if runtime.IsStrictDecodingError(gotErr) != runtime.IsStrictDecodingError(wantErr) {
		t.Fatalf("decode %q (strict %v): err %v, the serializer's %v: not both strict decoding errors", body, strict, gotErr, wantErr)
	}
	if !reflect.DeepEqual(gotObj, wantObj) {
		t.Fatalf("decode %q (strict %v):\n got %#v\nwant %#v", body, strict, gotObj, wantObj)
	}
}

func TestDecodeRequestIsTheSerializers(t *testing.T) {
	typed := newConfigMapObjects(t)
	checkRequestCases(t, requestCases, func(t *testing.T, body []byte, strict bool) {
		sameRequestAsSerializer(t, typed, body, strict)
	}, typed.decodeRequestJSON)
}

// FuzzDecodeRequestJSON checks that DecodeRequest returns for any JSON
// body what the serializer alone returns, object and error, as a typed
// and as a custom resource.
func FuzzDecodeRequestJSON(f *testing.F) {
	for _, tc := range slices.Concat(requestCases, unstructuredRequestCases) {
		f.Add([]byte(tc.body))
	}
	for _, tc := range storedCases {
		f.Add([]byte(tc.typed))
		f.Add([]byte(tc.unstructured))
	}
	typed := newConfigMapObjects(f)
	u := NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, strict := range []bool{false, true} {
			sameRequestAsSerializer(t, typed, body, strict)
			sameUnstructuredRequestAsSerializer(t, u, body, strict)
		}
	})
}

// unstructuredRequestCases add to the stored cases custom resource
// bodies that a strict decode reports on, and whether the one strict pass
// may take them.
var unstructuredRequestCases = []requestCase{
	{name: "duplicate field", onePass: true, body: `{"apiVersion":"example.com/v1","kind":"Widget","spec":{"a":1,"a":2}}`},
	{name: "duplicate fields deeper", onePass: true,
		body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","name":"b"},"spec":{"l":[{"x":1,"x":{}}]}}`},
	{name: "duplicate object", onePass: true, body: `{"apiVersion":"example.com/v1","kind":"Widget","spec":1,"spec":{}}`},
	{name: "number out of range", body: `{"apiVersion":"example.com/v1","kind":"Widget","spec":{"big":12345678901234567890,"f":1e400}}`},
	{name: "no kind", body: `{"apiVersion":"example.com/v1","metadata":{"name":"a"}}`},
}

// sameUnstructuredRequestAsSerializer fails t unless DecodeRequest
// returns for a JSON body what the serializer alone returns, strict or
// not, before the metadata is pruned.
func sameUnstructuredRequestAsSerializer(t *testing.T, u *Unstructured, body []byte, strict bool) {
	t.Helper()
	sameDecode(t, body, strict, u.decodeBody, func(body []byte, opts resource.DecodeOptions) (runtime.Object, error) {
		return u.decode(body, u.s.reader(opts))
	})
}

func TestUnstructuredDecodeRequestIsTheSerializers(t *testing.T) {
	u := NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
	cases := slices.Clone(unstructuredRequestCases)
	for _, tc := range storedCases {
		cases = append(cases, requestCase{"stored " + tc.name, tc.unstructured, tc.unstructuredOnePass})
	}
	checkRequestCases(t, cases, func(t *testing.T, body []byte, strict bool) {
		sameUnstructuredRequestAsSerializer(t, u, body, strict)
	}, u.decodeRequestJSON)
}
