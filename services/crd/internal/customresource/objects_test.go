package customresource_test

import (
	"encoding/json"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/resource"
)

// defaultedSpec is the spec of a widget that sets nothing.
const defaultedSpec = `{"maxReplicas":10,"mode":"fast","replicas":1,"template":{"depth":3}}`

func TestDecodeRequest(t *testing.T) {
	rs := widgetResources(t, widgetCRD(t))
	tests := []struct {
		name    string
		version string
		body    string
		strict  bool
		// want is the decoded object, as JSON.
		want string
		// wantStrict are the strict decoding errors, in kube's order.
		wantStrict []string
	}{{
		name:       "unknown spec field",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"foo":1}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":` + defaultedSpec + `}`,
		wantStrict: []string{`unknown field "spec.foo"`},
	}, {
		name:       "unknown nested field",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"template":{"depth":4,"bar":{"x":1}}}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"maxReplicas":10,"mode":"fast","replicas":1,"template":{"depth":4}}}`,
		wantStrict: []string{`unknown field "spec.template.bar"`},
	}, {
		name:       "unknown field of a list item",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"ports":[{"name":"a","port":1},{"name":"b","x":1}]}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"maxReplicas":10,"mode":"fast","ports":[{"name":"a","port":1},{"name":"b"}],"replicas":1,"template":{"depth":3}}}`,
		wantStrict: []string{`unknown field "spec.ports[1].x"`},
	}, {
		name:       "unknown fields of an embedded resource and its metadata",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"e","baz":3},"data":"d","qux":4}}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"embedded":{"apiVersion":"v1","data":"d","kind":"Thing","metadata":{"name":"e"}},"maxReplicas":10,"mode":"fast","replicas":1,"template":{"depth":3}}}`,
		wantStrict: []string{`unknown field "spec.embedded.qux"`, `unknown field "spec.embedded.metadata.baz"`},
	}, {
		name:       "unknown metadata field",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","foo":"x"},"spec":{}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":` + defaultedSpec + `}`,
		wantStrict: []string{`unknown field "metadata.foo"`},
	}, {
		name:   "every kind of unknown field, metadata first, then pruned, then embedded metadata",
		body:   `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","foo":1},"spec":{"foo":1,"template":{"bar":2},"ports":[{"name":"a","x":1}],"embedded":{"apiVersion":"v1","kind":"K","metadata":{"name":"e","baz":3},"qux":4}},"status":{"ready":true,"why":"x"}}`,
		strict: true,
		want:   `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"embedded":{"apiVersion":"v1","kind":"K","metadata":{"name":"e"}},"maxReplicas":10,"mode":"fast","ports":[{"name":"a"}],"replicas":1,"template":{"depth":3}},"status":{"ready":true}}`,
		wantStrict: []string{
			`unknown field "metadata.foo"`,
			`unknown field "spec.embedded.qux"`,
			`unknown field "spec.foo"`,
			`unknown field "spec.ports[0].x"`,
			`unknown field "spec.template.bar"`,
			`unknown field "status.why"`,
			`unknown field "spec.embedded.metadata.baz"`,
		},
	}, {
		name:       "duplicate fields come first, the last value wins",
		body:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":2,"foo":1,"replicas":3}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"maxReplicas":10,"mode":"fast","replicas":3,"template":{"depth":3}}}`,
		wantStrict: []string{`duplicate field "spec.replicas"`, `unknown field "spec.foo"`},
	}, {
		name: "not strict: unknown fields are dropped silently",
		body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","foo":1},"spec":{"foo":1,"template":{"bar":2},"ports":[{"name":"a","x":1}],"embedded":{"apiVersion":"v1","kind":"K","metadata":{"name":"e","baz":3},"qux":4}}}`,
		want: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"embedded":{"apiVersion":"v1","kind":"K","metadata":{"name":"e"}},"maxReplicas":10,"mode":"fast","ports":[{"name":"a"}],"replicas":1,"template":{"depth":3}}}`,
	}, {
		name:   "x-kubernetes-preserve-unknown-fields keeps them",
		body:   `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"extra":{"any":{"deep":[1,"two"]},"other":null}}}`,
		strict: true,
		want:   `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"extra":{"any":{"deep":[1,"two"]},"other":null},"maxReplicas":10,"mode":"fast","replicas":1,"template":{"depth":3}}}`,
	}, {
		name: "defaults fill what is missing at every depth, and only that",
		body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"}}`,
		want: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":` + defaultedSpec + `}`,
	}, {
		name: "set values are not defaulted, int-or-string keeps its type",
		body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":0,"mode":"slow","port":"http","template":{"depth":0}}}`,
		want: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"maxReplicas":10,"mode":"slow","port":"http","replicas":0,"template":{"depth":0}}}`,
	}, {
		name: "a null without a nullable schema is defaulted",
		body: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"replicas":null,"port":null}}`,
		want: `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":` + defaultedSpec + `}`,
	}, {
		name:       "a served version that is not stored has the same schema",
		version:    "v2",
		body:       `{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"w"},"spec":{"foo":1}}`,
		strict:     true,
		want:       `{"apiVersion":"example.com/v2","kind":"Widget","metadata":{"name":"w"},"spec":` + defaultedSpec + `}`,
		wantStrict: []string{`unknown field "spec.foo"`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			version := tc.version
			if version == "" {
				version = "v1"
			}
			obj, err := rs[version].Objects.DecodeRequest([]byte(tc.body), resource.DecodeOptions{Strict: tc.strict})
			var gotStrict []string
			if err != nil {
				se, ok := runtime.AsStrictDecodingError(err)
				if !ok {
					t.Fatalf("decode: %v, want only strict decoding errors", err)
				}
				for _, e := range se.Errors() {
					gotStrict = append(gotStrict, e.Error())
				}
			}
			if !slices.Equal(gotStrict, tc.wantStrict) {
				t.Errorf("strict errors:\n got %q\nwant %q", gotStrict, tc.wantStrict)
			}
			if obj == nil {
				t.Fatal("no object decoded")
			}
			got, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("decoded:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}
