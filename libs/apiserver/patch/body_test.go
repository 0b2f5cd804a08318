package patch

import (
	"reflect"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// An apply configuration decodes from a Body exactly as from kube's
// yaml.Unmarshal and yaml.UnmarshalStrict of the raw body: the same
// values, numbers of the same types, the same errors in the same words.
func FuzzApplyConfig(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata:\n  k: v\n",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"x":"1"}},"data":{"k":"v"}}`,
		"a: 1\nb: 1.5\nc: 1e3\nd: 12345678901234567890\ne: -0\nf: .inf\ng: 0x1F\nh: 1.0\n",
		`{"a":1,"b":1.5,"c":1e3,"d":12345678901234567890,"e":-0,"h":1.0}`,
		"a: x\na: y\n",
		`{"a":"x","a":"y"}`,
		"null",
		"",
		"[1, 2]",
		"just a string",
		"a: [",
		"a: {b: [1, {c: null}]}\n",
		"? [a]\n: b\n",
		"a: &x 1\nb: *x\n",
		"\t{\"a\": 1}",
		`{"a":"\ud83d\ude00","b":"\u00e9"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if hasNonStringKey(raw) {
			// Keys of other types that convert to the same string (0.0
			// and "0") collide in kube's conversion, in Go's random map
			// order: its answer is then no answer to compare with.
			t.Skip("a key that is not a string")
		}
		want, wantErr := kubeApplyConfig(raw)
		b, err := NewBody(types.ApplyYAMLPatchType, raw)
		if err != nil {
			if wantErr == nil {
				t.Fatalf("NewBody(%q): %v, but kube's decoding succeeds", raw, err)
			}
			return
		}
		got := map[string]any{}
		err = b.applyConfig(&got)
		if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Fatalf("decode %q: error %v, want %v", raw, err, wantErr)
		}
		if err == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("decode %q: %#v, want %#v", raw, got, want)
		}
		if err != nil {
			return
		}
		strictErr := yaml.UnmarshalStrict(raw, &map[string]any{})
		if (strictErr == nil) != (b.duplicates == nil) || strictErr != nil && strictErr.Error() != b.duplicates.Error() {
			t.Fatalf("duplicates of %q: %v, want %v", raw, b.duplicates, strictErr)
		}
	})
}

// kubeApplyConfig decodes an apply body as kube-apiserver does: the REST
// layer's check that it converts to JSON, then its apply patcher's
// yaml.Unmarshal.
func kubeApplyConfig(raw []byte) (map[string]any, error) {
	if _, err := sigsyaml.YAMLToJSON(raw); err != nil {
		return nil, err
	}
	obj := map[string]any{}
	err := yaml.Unmarshal(raw, &obj)
	return obj, err
}

// hasNonStringKey says whether a mapping in the YAML raw has a key that is
// not a string.
func hasNonStringKey(raw []byte) bool {
	var v any
	if yamlv2.Unmarshal(raw, &v) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[any]any:
			for k, e := range v {
				if _, ok := k.(string); !ok || walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(v)
}
