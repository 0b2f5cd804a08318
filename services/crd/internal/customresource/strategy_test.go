package customresource_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/warning"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// notChecked is kube's error when schema errors keep the CEL rules from
// running.
const notChecked = `<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation`

// widget is a v1 widget with spec, as a request body.
func widget(spec string) string {
	return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":` + spec + `}`
}

// prepared decodes body as the REST layer does before validation.
func prepared(t *testing.T, r *resource.Resource, body string) runtime.Object {
	t.Helper()
	obj, err := r.Objects.DecodeRequest([]byte(body), resource.DecodeOptions{})
	if err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	r.Strategy.PrepareForCreate(context.Background(), obj)
	return obj
}

func errorStrings(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func TestValidate(t *testing.T) {
	r := widgetResources(t, widgetCRD(t))["v1"]
	tests := []struct {
		name string
		body string
		want []string
	}{{
		name: "valid, with every construct set",
		body: widget(`{"replicas":2,"maxReplicas":3,"mode":"slow","port":"http","name":"short","template":{"depth":1,"labels":{"a":"b"}},"ports":[{"name":"a","port":1},{"name":"b","port":1}],"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"e"},"data":"d"},"extra":{"x":1}}`),
	}, {
		name: "int-or-string takes an integer",
		body: widget(`{"port":80}`),
	}, {
		name: "schema minimum",
		body: widget(`{"replicas":-1}`),
		want: []string{`spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0`},
	}, {
		name: "schema maxLength blocks the CEL rules",
		body: widget(`{"name":"much-too-long"}`),
		want: []string{`spec.name: Too long: may not be more than 8 bytes`, notChecked},
	}, {
		name: "schema enum blocks the CEL rules",
		body: widget(`{"mode":"other"}`),
		want: []string{`spec.mode: Unsupported value: "other": supported values: "fast", "slow", "broken"`, notChecked},
	}, {
		name: "CEL rule with message, reason and fieldPath",
		body: widget(`{"replicas":11}`),
		want: []string{`spec.replicas: Forbidden: replicas must not exceed maxReplicas`},
	}, {
		name: "CEL rule with messageExpression",
		body: widget(`{"mode":"broken"}`),
		want: []string{`spec: Invalid value: mode broken is not allowed`},
	}, {
		name: "list-map duplicate key",
		body: widget(`{"ports":[{"name":"a","port":1},{"name":"b"},{"name":"a","port":2}]}`),
		want: []string{`spec.ports[2]: Duplicate value: {"name":"a"}`},
	}, {
		// Embedded names are path segments, not DNS subdomains, as in kube.
		name: "embedded resource metadata",
		body: widget(`{"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a/b","labels":{"invalid":"x y"}}}}`),
		want: []string{
			`spec.embedded.metadata.name: Invalid value: "a/b": may not contain '/'`,
			`spec.embedded.metadata.labels: Invalid value: "x y": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
		},
	}, {
		name: "embedded resource without apiVersion and kind",
		body: widget(`{"embedded":{"data":"d"}}`),
		want: []string{`spec.embedded.apiVersion: Required value`, `spec.embedded.kind: Required value`, notChecked},
	}, {
		name: "another kind",
		body: `{"apiVersion":"example.com/v1","kind":"Gadget","metadata":{"name":"w"}}`,
		want: []string{`kind: Invalid value: "Gadget": must be Widget`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := errorStrings(r.Strategy.Validate(context.Background(), prepared(t, r, tc.body)))
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestValidateUpdate(t *testing.T) {
	r := widgetResources(t, widgetCRD(t))["v1"]
	tests := []struct {
		name     string
		old, new string
		want     []string
	}{{
		name: "an unchanged field that fails the schema is not refused",
		old:  widget(`{"name":"much-too-long","replicas":1}`),
		new:  widget(`{"name":"much-too-long","replicas":2}`),
	}, {
		name: "a changed field that fails the schema is refused",
		old:  widget(`{"name":"much-too-long"}`),
		new:  widget(`{"name":"much-too-long!"}`),
		want: []string{`spec.name: Too long: may not be more than 8 bytes`, notChecked},
	}, {
		name: "an unchanged object that fails a CEL rule is not refused",
		old:  widget(`{"replicas":11}`),
		new:  `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","labels":{"changed":"yes"}},"spec":{"replicas":11}}`,
	}, {
		name: "a changed object that fails a CEL rule is refused",
		old:  widget(`{"replicas":11}`),
		new:  widget(`{"replicas":12}`),
		want: []string{`spec.replicas: Forbidden: replicas must not exceed maxReplicas`},
	}, {
		name: "transition rule holds",
		old:  widget(`{"replicas":2}`),
		new:  widget(`{"replicas":3}`),
	}, {
		name: "transition rule fails on oldSelf",
		old:  widget(`{"replicas":3}`),
		new:  widget(`{"replicas":2}`),
		want: []string{`spec: Invalid value: replicas may not decrease`},
	}, {
		name: "a list-map duplicate already stored is not refused",
		old:  widget(`{"ports":[{"name":"a"},{"name":"a"}]}`),
		new:  widget(`{"ports":[{"name":"a"},{"name":"a"}],"mode":"slow"}`),
	}, {
		name: "a new list-map duplicate is refused",
		old:  widget(`{"ports":[{"name":"a"}]}`),
		new:  widget(`{"ports":[{"name":"a"},{"name":"a"}]}`),
		want: []string{`spec.ports[1]: Duplicate value: {"name":"a"}`},
	}, {
		name: "embedded metadata is checked whether it changed or not",
		old:  widget(`{"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a/b"}}}`),
		new:  widget(`{"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a/b"}},"mode":"slow"}`),
		want: []string{`spec.embedded.metadata.name: Invalid value: "a/b": may not contain '/'`},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, obj := prepared(t, r, tc.old), prepared(t, r, tc.new)
			got := errorStrings(r.Strategy.ValidateUpdate(context.Background(), obj, old))
			if !slices.Equal(got, tc.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// TestValidateStatusUpdate checks an update through /status is held to
// the rules of status, as kube's: a stored object whose embedded
// resource's metadata is invalid (rules are not ratcheted there) may
// still have its status updated, and the status schema applies.
func TestValidateStatusUpdate(t *testing.T) {
	r := widgetResources(t, widgetCRD(t))["v1"]
	sv, ok := r.Strategy.(rest.StatusValidator)
	if !ok {
		t.Fatal("the custom resource strategy has no rules of its own for /status")
	}
	withStatus := func(spec, status string) string {
		return `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns"},"spec":` + spec + `,"status":` + status + `}`
	}
	badEmbedded := `{"embedded":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"a/b"}}}`
	ctx := context.Background()
	old := prepared(t, r, withStatus(badEmbedded, `{"ready":false}`))
	if errs := r.Strategy.ValidateUpdate(ctx, prepared(t, r, withStatus(badEmbedded, `{"ready":true}`)), old); len(errs) == 0 {
		t.Fatal("the invalid embedded metadata is not refused by a main update: the case shows nothing")
	}
	if errs := sv.ValidateStatusUpdate(ctx, prepared(t, r, withStatus(badEmbedded, `{"ready":true}`)), old); len(errs) != 0 {
		t.Errorf("status update refused for what is outside status: %v", errorStrings(errs))
	}
	errs := sv.ValidateStatusUpdate(ctx, prepared(t, r, withStatus(badEmbedded, `{"ready":"yes"}`)), old)
	want := []string{`status.ready: Invalid value: "string": ready in body must be of type boolean: "string"`, notChecked}
	if got := errorStrings(errs); !slices.Equal(got, want) {
		t.Errorf("status update with an invalid status: %q, want %q", got, want)
	}
}

// recorder keeps the warnings validation reports through the context.
type recorder struct{ texts []string }

func (r *recorder) AddWarning(_, text string) { r.texts = append(r.texts, text) }

// TestRatchetingWarns checks that a rule failure ratcheting lets through
// is reported as a warning, which the REST layer sends as a Warning
// header, as kube does.
func TestRatchetingWarns(t *testing.T) {
	r := widgetResources(t, widgetCRD(t))["v1"]
	rec := &recorder{}
	ctx := warning.WithWarningRecorder(context.Background(), rec)
	old := prepared(t, r, widget(`{"replicas":11}`))
	obj := prepared(t, r, `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","labels":{"changed":"yes"}},"spec":{"replicas":11}}`)
	if errs := r.Strategy.ValidateUpdate(ctx, obj, old); len(errs) != 0 {
		t.Fatalf("ratcheted update refused: %v", errorStrings(errs))
	}
	want := []string{"spec.replicas: Forbidden: replicas must not exceed maxReplicas"}
	if !slices.Equal(rec.texts, want) {
		t.Errorf("warnings %q, want %q", rec.texts, want)
	}
}
