package customresource

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	openapiv2 "k8s.io/apiextensions-apiserver/pkg/controller/openapi/v2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
)

// Descriptions kube's published schemas give the fields every kind has.
const (
	objectMetaRef          = "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	metadataDescription    = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
	apiVersionDescription  = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
	kindDescription        = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
	embeddedAPIVersionDesc = "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"
	embeddedKindDesc       = "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
)

// openAPISchema is the version's schema as kube's apiextensions server
// publishes it: in full (OpenAPI v3, and what server-side apply types
// objects by) with apiVersion, kind and metadata typed as every kind's;
// and in the OpenAPI v2 form kubectl's v2 reader copes with (no
// junctors, nothing under fields that keep unknown fields, no defaults).
// nil without a structural schema, which the documents take as any
// object.
func openAPISchema(crd *apiextensionsv1.CustomResourceDefinition, version string, gvk schema.GroupVersionKind) (*resource.Schema, error) {
	ss, err := publishedStructural(crd, version)
	if err != nil || ss == nil {
		return nil, err
	}
	common, err := builtin.Definitions()
	if err != nil {
		return nil, fmt.Errorf("load built-in definitions: %w", err)
	}
	ref := definitionName(gvk)
	full := kubeNative(crd, version, gvk, ss, false)
	v2 := handler.PruneDefaultsSchema(kubeNative(crd, version, gvk, ss, true))
	defs := make(map[string]*spec.Schema, len(common)+1)
	v2Defs := make(map[string]*spec.Schema, len(common)+1)
	for name, d := range common {
		defs[name], v2Defs[name] = d, d
	}
	defs[ref], v2Defs[ref] = full, v2
	return &resource.Schema{Ref: ref, Definitions: defs, V2Definitions: v2Defs}, nil
}

// publishedStructural is the version's structural schema with its
// junctors unfolded, as kube publishes it; nil when the version has none
// or it is not structural.
func publishedStructural(crd *apiextensionsv1.CustomResourceDefinition, version string) (*structuralschema.Structural, error) {
	val, err := apihelpers.GetSchemaForVersion(crd, version)
	if err != nil || val == nil || val.OpenAPIV3Schema == nil {
		return nil, err
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
		return nil, fmt.Errorf("convert the schema of version %s: %w", version, err)
	}
	ss, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil || len(structuralschema.ValidateStructural(nil, ss)) > 0 {
		return nil, nil
	}
	return ss.Unfold(), nil
}

// kubeNative is kube's published schema of a kind from its structural
// schema, in the v2 form when v2 is set.
func kubeNative(crd *apiextensionsv1.CustomResourceDefinition, version string, gvk schema.GroupVersionKind, ss *structuralschema.Structural, v2 bool) *spec.Schema {
	var ret *spec.Schema
	if v2 && (ss.XPreserveUnknownFields || crd.Spec.PreserveUnknownFields) {
		// kubectl's v2 reader refuses fields a schema does not list,
		// so a kind that keeps unknown fields lists none.
		ret = &spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	} else {
		if v2 {
			ss = openapiv2.ToStructuralOpenAPIV2(ss)
		}
		ret = ss.ToKubeOpenAPI()
		ret.SetProperty("metadata", *spec.RefSchema(objectMetaRef).WithDescription(metadataDescription))
		ret.SetProperty("apiVersion", *spec.StringProperty().WithDescription(apiVersionDescription))
		ret.SetProperty("kind", *spec.StringProperty().WithDescription(kindDescription))
		addEmbeddedProperties(ret, v2)
	}
	ret.AddExtension("x-kubernetes-group-version-kind", []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}})
	for _, v := range crd.Spec.Versions {
		if v.Name != version || len(v.SelectableFields) == 0 {
			continue
		}
		fields := make([]any, 0, len(v.SelectableFields))
		for _, f := range v.SelectableFields {
			fields = append(fields, map[string]any{"fieldPath": strings.TrimPrefix(f.JSONPath, ".")})
		}
		ret.AddExtension("x-kubernetes-selectable-fields", fields)
	}
	return ret
}

// addEmbeddedProperties types the apiVersion, kind and metadata of the
// embedded resources under s, as kube does; in v2, not under fields that
// keep unknown fields, which kubectl would then refuse.
func addEmbeddedProperties(s *spec.Schema, v2 bool) {
	if s == nil {
		return
	}
	for k := range s.Properties {
		p := s.Properties[k]
		addEmbeddedProperties(&p, v2)
		s.Properties[k] = p
	}
	if s.Items != nil {
		addEmbeddedProperties(s.Items.Schema, v2)
	}
	if s.AdditionalProperties != nil {
		addEmbeddedProperties(s.AdditionalProperties.Schema, v2)
	}
	if keep, ok := s.Extensions.GetBool("x-kubernetes-preserve-unknown-fields"); ok && keep && v2 {
		return
	}
	if embedded, ok := s.Extensions.GetBool("x-kubernetes-embedded-resource"); !ok || !embedded {
		return
	}
	s.SetProperty("apiVersion", *spec.StringProperty().WithDescription(embeddedAPIVersionDesc))
	s.SetProperty("kind", *spec.StringProperty().WithDescription(embeddedKindDesc))
	s.SetProperty("metadata", *spec.RefSchema(objectMetaRef).WithDescription(metadataDescription))
	for _, f := range []string{"kind", "apiVersion"} {
		if !slices.Contains(s.Required, f) {
			s.Required = append(s.Required, f)
		}
	}
}
