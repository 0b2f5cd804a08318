package customresource_test

import (
	"encoding/json"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/util/webhook"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/services/crd/internal/customresource"
)

// widgetSchema has one of each construct whose handling differs from a
// plain JSON object: defaults at several depths, CEL rules (with
// message, messageExpression, reason and fieldPath, and a transition
// rule), int-or-string, a list-map, an embedded resource and a subtree
// that keeps unknown fields.
const widgetSchema = `{
  "type": "object",
  "properties": {
    "spec": {
      "type": "object",
      "default": {},
      "x-kubernetes-validations": [
        {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas", "reason": "FieldValueForbidden", "fieldPath": ".replicas"},
        {"rule": "self.mode != 'broken'", "messageExpression": "'mode ' + self.mode + ' is not allowed'"},
        {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas may not decrease"}
      ],
      "properties": {
        "replicas": {"type": "integer", "default": 1, "minimum": 0},
        "maxReplicas": {"type": "integer", "default": 10},
        "mode": {"type": "string", "default": "fast", "enum": ["fast", "slow", "broken"]},
        "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
        "name": {"type": "string", "maxLength": 8},
        "template": {
          "type": "object",
          "default": {},
          "properties": {
            "depth": {"type": "integer", "default": 3},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
          }
        },
        "ports": {
          "type": "array",
          "x-kubernetes-list-type": "map",
          "x-kubernetes-list-map-keys": ["name"],
          "items": {
            "type": "object",
            "required": ["name"],
            "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}
          }
        },
        "embedded": {
          "type": "object",
          "x-kubernetes-embedded-resource": true,
          "properties": {"data": {"type": "string"}}
        },
        "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
      }
    },
    "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
  }
}`

// widgetCRD defines widgets.example.com: v1 is stored, v1 and v2 are
// served with the same schema and conversion None.
func widgetCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	props := &apiextensionsv1.JSONSchemaProps{}
	if err := json.Unmarshal([]byte(widgetSchema), props); err != nil {
		t.Fatalf("read the widget schema: %v", err)
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{
		Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList",
		ShortNames: []string{"wd"}, Categories: []string{"all"},
	}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{
			Name: name, Served: true, Storage: storage,
			Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: props.DeepCopy()},
			Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
		}
	}
	v1, v2 := version("v1", true), version("v2", false)
	v1.AdditionalPrinterColumns = []apiextensionsv1.CustomResourceColumnDefinition{
		{Name: "Replicas", Type: "integer", JSONPath: ".spec.replicas", Description: "wanted replicas"},
		{Name: "Mode", Type: "string", JSONPath: ".spec.mode", Priority: 1},
		{Name: "Created", Type: "date", JSONPath: ".metadata.creationTimestamp"},
	}
	v1.SelectableFields = []apiextensionsv1.SelectableField{{JSONPath: ".spec.mode"}, {JSONPath: ".spec.replicas"}}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: types.UID("5f0c6a1e-0000-4000-8000-000000000001"), Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:      "example.com",
			Names:      names,
			Scope:      apiextensionsv1.NamespaceScoped,
			Versions:   []apiextensionsv1.CustomResourceDefinitionVersion{v1, v2},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names, StoredVersions: []string{"v1"}},
	}
}

// now is the test clock's time, so ages print the same on every run.
var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// widgetResources serves crd's versions with kube's converter, as the
// crd server does, keyed by version.
func widgetResources(t testing.TB, crd *apiextensionsv1.CustomResourceDefinition) map[string]*resource.Resource {
	t.Helper()
	converters, err := conversion.NewCRConverterFactory(webhook.NewDefaultServiceResolver(), func(r webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver { return r })
	if err != nil {
		t.Fatalf("converter factory: %v", err)
	}
	rs, err := customresource.Resources(crd, converters, clocktesting.NewFakePassiveClock(now))
	if err != nil {
		t.Fatalf("resources: %v", err)
	}
	out := make(map[string]*resource.Resource, len(rs))
	for _, r := range rs {
		out[r.GroupVersionResource.Version] = r
	}
	return out
}
