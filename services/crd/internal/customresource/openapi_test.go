package customresource_test

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestPublishedSchemas checks the two forms kube publishes a custom
// resource's schema in: v3 in full, v2 without what kubectl's v2 reader
// cannot handle.
func TestPublishedSchemas(t *testing.T) {
	r := widgetResources(t, widgetCRD(t))["v1"]
	full, v2 := r.Schema.Definitions[r.Schema.Ref], r.Schema.V2Definitions[r.Schema.Ref]
	if full == nil || v2 == nil {
		t.Fatalf("definitions of %s missing: full %v, v2 %v", r.Schema.Ref, full != nil, v2 != nil)
	}
	spec, spec2 := full.Properties["spec"], v2.Properties["spec"]
	if spec.Default == nil || spec2.Default != nil {
		t.Errorf("spec default: full %v, v2 %v; want it in full only", spec.Default, spec2.Default)
	}
	if port := spec.Properties["port"]; len(port.AnyOf) != 2 {
		t.Errorf("int-or-string in full: anyOf %v, want both types", port.AnyOf)
	}
	if port := spec2.Properties["port"]; len(port.AnyOf) != 0 {
		t.Errorf("int-or-string in v2: anyOf %v, want none", port.AnyOf)
	}
	if extra := spec2.Properties["extra"]; len(extra.Type) != 0 {
		t.Errorf("a field keeping unknown fields in v2 has type %v, want none", extra.Type)
	}
	embedded := spec.Properties["embedded"]
	for _, f := range []string{"apiVersion", "kind", "metadata"} {
		if _, ok := embedded.Properties[f]; !ok {
			t.Errorf("embedded resource lacks %s", f)
		}
	}
	if !slices.Contains(embedded.Required, "kind") || !slices.Contains(embedded.Required, "apiVersion") {
		t.Errorf("embedded resource requires %v, want kind and apiVersion", embedded.Required)
	}
	for name, s := range map[string][]string{"full": full.Required, "v2": v2.Required} {
		if slices.Contains(s, "kind") {
			t.Errorf("%s: the kind itself requires kind", name)
		}
	}
	if md := full.Properties["metadata"]; md.Ref.String() != "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" {
		t.Errorf("metadata is %q, want ObjectMeta", md.Ref.String())
	}
}

// TestPublishedSchemaKeepingUnknownFields checks a kind whose root keeps
// unknown fields: v2 lists no field at all, as kube, so that kubectl
// accepts any; v3 says so with the extension.
func TestPublishedSchemaKeepingUnknownFields(t *testing.T) {
	crd := widgetCRD(t)
	keep := true
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &keep}}
		crd.Spec.Versions[i].AdditionalPrinterColumns = nil
		crd.Spec.Versions[i].SelectableFields = nil
	}
	r := widgetResources(t, crd)["v1"]
	v2 := r.Schema.V2Definitions[r.Schema.Ref]
	if len(v2.Properties) != 0 || !slices.Equal(v2.Type, []string{"object"}) {
		t.Errorf("v2: type %v, properties %v; want an object with none", v2.Type, v2.Properties)
	}
	if _, ok := v2.Extensions["x-kubernetes-preserve-unknown-fields"]; ok {
		t.Error("v2 carries x-kubernetes-preserve-unknown-fields")
	}
	if keep, ok := r.Schema.Definitions[r.Schema.Ref].Extensions.GetBool("x-kubernetes-preserve-unknown-fields"); !ok || !keep {
		t.Error("v3 lacks x-kubernetes-preserve-unknown-fields")
	}
}
