package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSchemaRefusesMisspelledValues: a key the chart does not know fails
// helm template, at the top, deep down, and inside a list; so do values
// of the wrong kind. The same values spelled right pass, so the failures
// are the schema's.
func TestSchemaRefusesMisspelledValues(t *testing.T) {
	for _, tc := range []struct{ wrong, right, why string }{
		{"gatway: {replicas: 3}", "gateway: {replicas: 3}", "additional properties 'gatway' not allowed"},
		{"core: {replicsa: 3}", "core: {replicas: 3}", "additional properties 'replicsa' not allowed"},
		{"etcd: {bundled: {persistence: {sise: 1Gi}}}", "etcd: {bundled: {persistence: {size: 1Gi}}}", "additional properties 'sise' not allowed"},
		{"authz: {tolerations: [{key: a, operater: Exists}]}", "authz: {tolerations: [{key: a, operator: Exists}]}", "additional properties 'operater' not allowed"},
		{"etcd: {bundled: {replicas: 2}}", "etcd: {bundled: {replicas: 3}}", "replicas"},
		{"nats: {mode: embedded}", "nats: {mode: bundled}", "mode"},
		{"core: {shutdownDelay: 5}", "core: {shutdownDelay: 5s}", "shutdownDelay"},
		{"gateway: {extraArgs: [verbose]}", "gateway: {extraArgs: [--shutdown-timeout=30s]}", "extraArgs"},
	} {
		t.Run(tc.wrong, func(t *testing.T) {
			_, err := renderRaw(t, tc.wrong)
			if err == nil || !strings.Contains(err.Error(), tc.why) {
				t.Errorf("helm template with %q: %v, want a schema error about %s", tc.wrong, err, tc.why)
			}
			if _, err := renderRaw(t, tc.right); err != nil {
				t.Errorf("helm template with %q: %v", tc.right, err)
			}
		})
	}
}

// TestSchemaIsClosed: every object of values.schema.json says which keys
// it takes (additionalProperties false) or is a map whose values it
// types; and each key it allows has a default in values.yaml, where users
// read what they can set.
func TestSchemaIsClosed(t *testing.T) {
	var schema map[string]any
	data, err := os.ReadFile(filepath.Join(chartDir(t), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	defs, _ := schema["definitions"].(map[string]any)
	var values map[string]any
	if data, err = os.ReadFile(filepath.Join(chartDir(t), "values.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	// A definition is a Kubernetes type's (a toleration, a security
	// context): its optional fields need no default.
	var walk func(path string, s map[string]any, v any, defaults bool)
	walk = func(path string, s map[string]any, v any, defaults bool) {
		if ref, ok := s["$ref"].(string); ok {
			defaults = false
			def, ok := defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
			if !ok {
				t.Errorf("%s: $ref %s names no definition", path, ref)
				return
			}
			s = def
		}
		if s["type"] == "object" {
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if ap {
					t.Errorf("%s: additionalProperties true", path)
				}
			case map[string]any:
				// A map: keys are the user's, values typed.
				if _, typed := ap["type"]; !typed && ap["$ref"] == nil {
					t.Errorf("%s: map values untyped", path)
				}
				return
			default:
				t.Errorf("%s: additionalProperties unset, which lets any key in", path)
			}
		}
		if items, ok := s["items"].(map[string]any); ok {
			list, _ := v.([]any)
			var first any
			if len(list) > 0 {
				first = list[0]
			}
			walk(path+"[]", items, first, false)
		}
		props, _ := s["properties"].(map[string]any)
		obj, isObj := v.(map[string]any)
		for k, p := range props {
			child, set := obj[k]
			if defaults && isObj && !set {
				t.Errorf("%s.%s: allowed by the schema, missing from values.yaml", path, k)
			}
			walk(path+"."+k, p.(map[string]any), child, defaults)
		}
	}
	walk("values", schema, values, true)
	for name, d := range defs {
		walk("definitions."+name, d.(map[string]any), nil, false)
	}
}
