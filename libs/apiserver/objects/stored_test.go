package objects

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// storedCases are documents Decode may meet: what the store writes, and
// neighbours on which encoding/json's case-insensitive, last-wins reading
// of apiVersion and kind differs from a case-sensitive decoder's, so that
// the one pass must refuse them. typedOnePass and unstructuredOnePass say
// whether it may take them.
var storedCases = []struct {
	name, typed, unstructured         string
	typedOnePass, unstructuredOnePass bool
}{
	{name: "as stored", typedOnePass: true, unstructuredOnePass: true,
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","managedFields":[{"manager":"m","apiVersion":"v1","fieldsV1":{"f:data":{"f:k":{}}}}]},"data":{"k":"v"}}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"n":12345678901234567890,"i":3,"f":1.5,"l":[1,{"kind":"x"}]}}`},
	{name: "spaces and tricky strings", typedOnePass: true, unstructuredOnePass: true,
		typed:        " {\n \"metadata\" : {\"name\":\"a\\\"}{,\"} , \"kind\" : \"ConfigMap\", \"apiVersion\":\"v1\", \"data\":{\"Kind\":\"}\\\\\"} } ",
		unstructured: " {\n \"spec\" : {\"x\":\"a\\\"]}{,\"} , \"kind\" : \"Widget\", \"apiVersion\":\"example.com/v1\", \"b\":[true,null,-1e3] } "},
	{name: "other version", unstructuredOnePass: true,
		typed:        `{"kind":"ConfigMap","apiVersion":"v2","metadata":{"name":"a"}}`,
		unstructured: `{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"a"}}`},
	{name: "empty group spelled out", typedOnePass: true,
		typed:        `{"kind":"ConfigMap","apiVersion":"/v1","metadata":{"name":"a"}}`,
		unstructured: `{"apiVersion":"example.com/","kind":"Widget"}`},
	{name: "case variant key",
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","Kind":"Secret","data":{"k":"dg=="}}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":"Widget","KIND":5}`},
	{name: "case variant apiVersion",
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","APIVERSION":"a/b/c"}`,
		unstructured: `{"apiversion":"example.com/v1","kind":"Widget"}`},
	{name: "kelvin sign",
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","` + "\u212a" + `ind":"Secret"}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":"Widget","` + "\u212a" + `IND":[]}`},
	{name: "escaped key",
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","\u004bind":"Secret"}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":"Widget","\u004bind":{}}`},
	{name: "duplicate kind",
		typed:        `{"kind":"Secret","kind":"ConfigMap","apiVersion":"v1"}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":5,"kind":"Widget"}`},
	{name: "duplicate apiVersion",
		typed:        `{"kind":"ConfigMap","apiVersion":"v2","apiVersion":"v1"}`,
		unstructured: `{"apiVersion":{},"apiVersion":"example.com/v1","kind":"Widget"}`},
	{name: "null kind",
		typed:        `{"kind":null,"apiVersion":"v1"}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":null}`},
	{name: "no apiVersion",
		typed:        `{"kind":"ConfigMap","metadata":{"name":"a"}}`,
		unstructured: `{"kind":"Widget","metadata":{"name":"a"}}`},
	{name: "wrong type", unstructuredOnePass: true,
		typed:        `{"kind":"ConfigMap","apiVersion":"v1","data":{"k":5}}`,
		unstructured: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":[]}`},
	{name: "not an object", typed: `null`, unstructured: `[]`},
	{name: "empty object", typed: `{}`, unstructured: `{}`},
	{name: "truncated", typed: `{"kind":"ConfigMap","apiVersion":"v1"`, unstructured: `{"apiVersion":"example.com/v1","kind":"Widget",`},
	{name: "trailing data", typed: `{"kind":"ConfigMap","apiVersion":"v1"} {}`, unstructured: `{"apiVersion":"example.com/v1","kind":"Widget"}x`},
}

type storedDecoder struct {
	onePass    func([]byte) (runtime.Object, bool)
	serializer func([]byte) (runtime.Object, error)
	decode     func([]byte) (runtime.Object, error)
}

func storedDecoders(tb testing.TB) map[string]storedDecoder {
	tb.Helper()
	typed := newConfigMapObjects(tb)
	u := NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
	return map[string]storedDecoder{
		"typed": {
			onePass:    typed.decodeStored,
			serializer: func(data []byte) (runtime.Object, error) { return typed.decode(data, typed.s.json) },
			decode:     typed.Decode,
		},
		"unstructured": {
			onePass:    u.decodeStored,
			serializer: func(data []byte) (runtime.Object, error) { return u.decode(data, u.s.json) },
			decode:     u.Decode,
		},
	}
}

// sameAsSerializer fails t unless Decode returns for data exactly what the
// JSON serializer alone returns.
func sameAsSerializer(t *testing.T, d storedDecoder, data []byte) {
	t.Helper()
	got, gotErr := d.decode(data)
	want, wantErr := d.serializer(data)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("decode %q: err %v, the serializer's %v", data, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decode %q:\n got %#v\nwant %#v", data, got, want)
	}
}

func TestDecodeStoredIsTheSerializers(t *testing.T) {
	decoders := storedDecoders(t)
	for _, tc := range storedCases {
		shapes := []struct {
			name, body string
			onePass    bool
		}{
			{"typed", tc.typed, tc.typedOnePass},
			{"unstructured", tc.unstructured, tc.unstructuredOnePass},
		}
		for _, s := range shapes {
			t.Run(tc.name+"/"+s.name, func(t *testing.T) {
				d := decoders[s.name]
				sameAsSerializer(t, d, []byte(s.body))
				if _, ok := d.onePass([]byte(s.body)); ok != s.onePass {
					t.Fatalf("one pass taken %v, want %v", ok, s.onePass)
				}
			})
		}
	}
}

// FuzzDecodeStored checks that Decode returns what the serializer alone
// returns, object and error, for any bytes.
func FuzzDecodeStored(f *testing.F) {
	for _, tc := range storedCases {
		f.Add([]byte(tc.typed))
		f.Add([]byte(tc.unstructured))
	}
	decoders := storedDecoders(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range decoders {
			sameAsSerializer(t, d, data)
		}
	})
}
