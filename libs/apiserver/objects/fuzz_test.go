package objects_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
)

// decodeSeeds are request bodies as kubectl create/replace and client-go
// send them, in JSON and YAML, and their malformed neighbours.
var decodeSeeds = []string{
	`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a","namespace":"ns","creationTimestamp":null},"data":{"key":"value"}}`,
	`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"12","labels":{"app":"web"},"annotations":{"kubectl.kubernetes.io/last-applied-configuration":"{}\n"}},"binaryData":{"b":"aGVsbG8="},"immutable":true}`,
	"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    app: web\ndata:\n  key: value\n",
	`{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","generateName":"w-","finalizers":["example.com/f"]},"spec":{"size":3,"parts":["a","b"],"big":12345678901234567890},"status":{"ready":true}}`,
	"apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n  nested: {a: [1, 2.5, null, yes]}\n",
	`{"apiVersion":"v1","kind":"ConfigMapList","items":[{"metadata":{"name":"a"}}]}`,
	`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"data":{"k":"not base64"}}`,
	`{"metadata":{"name":"a","name":"b"},"dta":{}}`,
	"metadata:\n  name: a\n  name: b\n",
	"a: &x [*x]\n",
	`{"metadata":{"managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}]}}`,
	`{"metadata":`, `[]`, `null`, `"str"`, `1e400`, ``, "\xff\xfe",
}

// FuzzDecodeRequest decodes random bodies as JSON and YAML, strictly and
// not, into a typed and an unstructured kind: decoding never panics, a
// failed decode returns no object, and a strict decoding error comes only
// from a strict decode, with the object.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s), false, false)
		f.Add([]byte(s), true, true)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	typed, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("ConfigMap"), "ConfigMapList")
	if err != nil {
		f.Fatal(err)
	}
	kinds := map[string]resource.Objects{"typed": typed, "unstructured": widgets()}
	f.Fuzz(func(t *testing.T, body []byte, yaml, strict bool) {
		for name, o := range kinds {
			obj, err := o.DecodeRequest(body, resource.DecodeOptions{YAML: yaml, Strict: strict})
			switch {
			case runtime.IsStrictDecodingError(err):
				if !strict || obj == nil {
					t.Fatalf("%s: strict decoding error %v from a decode with Strict=%v, object %v", name, err, strict, obj)
				}
			case err != nil:
				if obj != nil {
					t.Fatalf("%s: decode of %q failed with %v but returned %v", name, body, err, obj)
				}
				continue
			case obj == nil:
				t.Fatalf("%s: decode of %q returned neither object nor error", name, body)
			}
			if _, err := o.Encode(obj); err != nil {
				t.Fatalf("%s: decoded %q does not encode: %v", name, body, err)
			}
		}
	})
}
