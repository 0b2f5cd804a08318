package objects_test

import (
	"bytes"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/objects"
)

func TestJSONIsMarshal(t *testing.T) {
	widget := func(spec map[string]any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": "w", "namespace": "ns", "labels": map[string]any{"a": "b"}},
			"spec":     spec,
		}}
	}
	cases := map[string]runtime.Object{
		"custom resource": widget(map[string]any{"size": int64(3), "ratio": 0.25, "big": int64(1) << 62, "tiny": 1e-9, "huge": 1e300, "parts": []any{"a", nil, true, map[string]any{}}}),
		// json.Marshal escapes these in strings and keys; so must JSON.
		"characters that are escaped": widget(map[string]any{"html": "<a href=\"x\">&amp;</a>", "<key>": "\u2028\u2029", "ctl": "\x00\x1f\t\n", "utf8": "żółw 🐢", "bad": "\xff"}),
		"empty":                       &unstructured.Unstructured{},
		"list": &unstructured.UnstructuredList{
			Object: map[string]any{"apiVersion": "example.com/v1", "kind": "WidgetList", "metadata": map[string]any{"resourceVersion": "12"}},
			Items:  []unstructured.Unstructured{*widget(map[string]any{"n": int64(1)}), *widget(nil)},
		},
		"empty list": &unstructured.UnstructuredList{Object: map[string]any{"kind": "WidgetList"}},
		"typed":      &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"k": "<v>"}},
		"status":     &metav1.Status{Status: metav1.StatusFailure, Message: "a & b", Code: 409},
	}
	for name, obj := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			got, err := objects.JSON(obj)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("JSON:\n%s\njson.Marshal:\n%s", got, want)
			}
		})
	}
}

func TestJSONError(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "Widget", "spec": map[string]any{"f": func() {}}}}
	if _, err := json.Marshal(u); err == nil {
		t.Fatal("json.Marshal encoded a func")
	}
	if b, err := objects.JSON(u); err == nil {
		t.Fatalf("JSON encoded a func: %s", b)
	}
}

// FuzzJSON checks JSON against json.Marshal on custom resources made of
// any JSON document, decoded as the store decodes one.
func FuzzJSON(f *testing.F) {
	for _, s := range decodeSeeds {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"kind":"W","spec":{"s":"<\u2028>&","n":-0,"f":1.5e-7,"i":9007199254740993}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
		if err != nil {
			return
		}
		want, err := json.Marshal(obj)
		if err != nil {
			t.Skip(err)
		}
		got, err := objects.JSON(obj)
		if err != nil {
			t.Fatalf("JSON failed where json.Marshal did not: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("JSON:\n%s\njson.Marshal:\n%s", got, want)
		}
	})
}

// BenchmarkJSON encodes a custom resource as a response or a watch event,
// by json.Marshal and by JSON.
func BenchmarkJSON(b *testing.B) {
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(storedWidget(b, widgets())); err != nil {
		b.Fatal(err)
	}
	for name, encode := range map[string]func(runtime.Object) ([]byte, error){
		"marshal": func(o runtime.Object) ([]byte, error) { return json.Marshal(o) },
		"JSON":    objects.JSON,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := encode(&u); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
