package objects_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
)

func typedConfigMaps(t testing.TB) resource.Objects {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	o, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func widgets() resource.Objects {
	return objects.NewUnstructured(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, "WidgetList")
}

func TestRoundTrip(t *testing.T) {
	for name, o := range map[string]resource.Objects{"typed": typedConfigMaps(t), "unstructured": widgets()} {
		t.Run(name, func(t *testing.T) {
			body := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}`
			if name == "typed" {
				// Built-in kinds take apiVersion and kind from the endpoint when the body leaves them out.
				body = `{"metadata":{"name":"a","labels":{"x":"y"}},"data":{"k":"v"}}`
			}
			obj, err := o.DecodeRequest([]byte(body), resource.DecodeOptions{})
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			data, err := o.Encode(obj)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			back, err := o.Decode(data)
			if err != nil {
				t.Fatalf("decode stored: %v", err)
			}
			again, err := o.Encode(back)
			if err != nil {
				t.Fatalf("encode again: %v", err)
			}
			if string(data) != string(again) {
				t.Fatalf("round trip changed bytes:\n%s\n%s", data, again)
			}
			if !strings.Contains(string(data), `"kind":`) || !strings.Contains(string(data), `"apiVersion":`) {
				t.Fatalf("stored bytes lack apiVersion or kind: %s", data)
			}
		})
	}
}

func TestStrictDecoding(t *testing.T) {
	cases := []struct {
		name, body string
		yaml       bool
		objects    resource.Objects
		want       []string
	}{
		{name: "typed unknown field", body: `{"metadata":{"name":"a"},"dta":{}}`, objects: typedConfigMaps(t), want: []string{`unknown field "dta"`}},
		{name: "typed duplicate field", body: `{"metadata":{"name":"a","name":"b"}}`, objects: typedConfigMaps(t), want: []string{`duplicate field "metadata.name"`}},
		{name: "unstructured unknown metadata field", body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","nmae":"b"}}`, objects: widgets(), want: []string{`unknown field "metadata.nmae"`}},
		{name: "unstructured duplicate field", body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a"},"spec":{"x":1,"x":2}}`, objects: widgets(), want: []string{`duplicate field "spec.x"`}},
		{name: "yaml duplicate", body: "metadata:\n  name: a\n  name: b\n", yaml: true, objects: typedConfigMaps(t), want: []string{`"name"`, "already set"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := tc.objects.DecodeRequest([]byte(tc.body), resource.DecodeOptions{YAML: tc.yaml, Strict: true})
			if !runtime.IsStrictDecodingError(err) {
				t.Fatalf("err = %v, want a strict decoding error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
			if obj == nil {
				t.Fatal("strict error must come with the decoded object")
			}
			if _, err := tc.objects.DecodeRequest([]byte(tc.body), resource.DecodeOptions{YAML: tc.yaml}); err != nil {
				t.Fatalf("lenient decode: %v", err)
			}
		})
	}
}

func TestMalformedBody(t *testing.T) {
	for name, o := range map[string]resource.Objects{"typed": typedConfigMaps(t), "unstructured": widgets()} {
		if _, err := o.DecodeRequest([]byte(`{"metadata":`), resource.DecodeOptions{Strict: true}); err == nil || runtime.IsStrictDecodingError(err) {
			t.Errorf("%s: truncated JSON decoded with err %v, want a syntax error", name, err)
		}
	}
}

func TestUnstructuredKeepsBodyKind(t *testing.T) {
	obj, err := widgets().DecodeRequest([]byte(`{"apiVersion":"example.com/v2","kind":"Gadget","metadata":{"name":"a"}}`), resource.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.(*unstructured.Unstructured).GroupVersionKind(); got.Version != "v2" || got.Kind != "Gadget" {
		t.Fatalf("gvk = %v, want the body's example.com/v2 Gadget", got)
	}
}

// Like kube-apiserver for custom resources, a body must say its kind.
func TestUnstructuredRequiresKind(t *testing.T) {
	_, err := widgets().DecodeRequest([]byte(`{"metadata":{"name":"a"}}`), resource.DecodeOptions{})
	if err == nil || !strings.Contains(err.Error(), "Object 'Kind' is missing") {
		t.Fatalf("err = %v, want Object 'Kind' is missing", err)
	}
}

// client-go's typed clients send built-in kinds as protobuf.
func TestProtobufBodies(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	sent := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Data:       map[string]string{"k": "v"},
	}
	if err := protobuf.NewSerializer(scheme, scheme).Encode(sent, &body); err != nil {
		t.Fatal(err)
	}
	obj, err := typedConfigMaps(t).DecodeRequest(body.Bytes(), resource.DecodeOptions{Protobuf: true})
	if err != nil {
		t.Fatalf("decode protobuf: %v", err)
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok || cm.Name != "a" || cm.Data["k"] != "v" || cm.Kind != "ConfigMap" || cm.APIVersion != "v1" {
		t.Fatalf("decoded %#v", obj)
	}
	if _, err := widgets().DecodeRequest(body.Bytes(), resource.DecodeOptions{Protobuf: true}); err == nil {
		t.Fatal("an unstructured kind read a protobuf body")
	}
	if got := widgets().MediaTypes(); slices.Contains(got, runtime.ContentTypeProtobuf) {
		t.Fatalf("unstructured media types %v offer protobuf", got)
	}
}

// Like kube-apiserver for custom resources, metadata keeps only the fields
// of ObjectMeta, whether or not the client asked for strict validation.
func TestUnstructuredMetadataIsPruned(t *testing.T) {
	obj, err := widgets().DecodeRequest([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"a","nmae":"b","labels":{"x":"y"}},"spec":{"free":"form"}}`), resource.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := obj.(*unstructured.Unstructured)
	meta := u.Object["metadata"].(map[string]any)
	if _, ok := meta["nmae"]; ok {
		t.Fatalf("unknown metadata field kept: %v", meta)
	}
	if _, ok := meta["creationTimestamp"]; ok {
		t.Fatalf("pruning added a creationTimestamp: %v", meta)
	}
	if u.GetName() != "a" || u.GetLabels()["x"] != "y" {
		t.Fatalf("pruning lost known fields: %v", meta)
	}
	if spec, _, _ := unstructured.NestedString(u.Object, "spec", "free"); spec != "form" {
		t.Fatalf("pruning touched spec: %v", u.Object)
	}
	if _, err := widgets().DecodeRequest([]byte(`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":5}}`), resource.DecodeOptions{}); err == nil {
		t.Fatal("a metadata.name of the wrong type decoded")
	}
}

// TestTypedWithoutList checks a kind that is never stored: it needs no
// list kind, and one that is not registered is still refused.
func TestTypedWithoutList(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	binding := corev1.SchemeGroupVersion.WithKind("Binding")
	o, err := objects.NewTyped(scheme, binding, "")
	if err != nil {
		t.Fatal(err)
	}
	if o.NewList() != nil {
		t.Fatalf("NewList of a kind without a list: %T", o.NewList())
	}
	if got := o.New().GetObjectKind().GroupVersionKind(); got != binding {
		t.Fatalf("New: kind %v", got)
	}
	if _, err := objects.NewTyped(scheme, binding, "BindingList"); err == nil {
		t.Fatal("NewTyped accepted an unregistered list kind")
	}
}
