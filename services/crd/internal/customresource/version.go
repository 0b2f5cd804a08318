package customresource

import (
	"fmt"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// version is what serving one version of a CRD takes: its kind, where
// its objects are stored, and the schema machinery built once per CRD
// change rather than per request.
type version struct {
	gvk       schema.GroupVersionKind
	storageGV schema.GroupVersion
	// converter converts between the CRD's versions (kube's: an
	// apiVersion rewrite, or the conversion webhook).
	converter runtime.ObjectConvertor
	// structural is the version's schema with its defaults pruned; nil
	// when the version has none.
	structural *structuralschema.Structural
	// preserveUnknownFields is the CRD's legacy spec.preserveUnknownFields:
	// nothing is pruned.
	preserveUnknownFields bool
	validator             apiservervalidation.SchemaValidator
	// statusValidator validates status alone, for updates through
	// /status; nil without a status schema.
	statusValidator apiservervalidation.SchemaValidator
	// cel validates x-kubernetes-validations; nil without rules.
	cel *cel.Validator
}

// newVersion builds the machinery of version name of crd.
func newVersion(crd *apiextensionsv1.CustomResourceDefinition, name string, converter runtime.ObjectConvertor) (*version, error) {
	storage, err := apihelpers.GetCRDStorageVersion(crd)
	if err != nil {
		return nil, err
	}
	v := &version{
		gvk:                   schema.GroupVersionKind{Group: crd.Spec.Group, Version: name, Kind: crd.Status.AcceptedNames.Kind},
		storageGV:             schema.GroupVersion{Group: crd.Spec.Group, Version: storage},
		converter:             converter,
		preserveUnknownFields: crd.Spec.PreserveUnknownFields,
	}
	val, err := apihelpers.GetSchemaForVersion(crd, name)
	if err != nil {
		return nil, err
	}
	var props *apiextensions.JSONSchemaProps
	if val != nil {
		internal := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(val, internal, nil); err != nil {
			return nil, fmt.Errorf("convert the schema of version %s: %w", name, err)
		}
		props = internal.OpenAPIV3Schema
	}
	if props != nil {
		s, err := structuralschema.NewStructural(props)
		if err != nil && !crd.Spec.PreserveUnknownFields {
			// Validation admits only structural schemas.
			return nil, fmt.Errorf("the schema of version %s is not structural: %w", name, err)
		}
		if err == nil {
			// Defaults are pruned of what the schema does not know, as
			// kube serves them; s shares parts with props, so a copy.
			s = s.DeepCopy()
			if err := structuraldefaulting.PruneDefaults(s); err != nil {
				return nil, fmt.Errorf("prune the defaults of version %s: %w", name, err)
			}
			v.structural = s
			v.cel = cel.NewValidator(s, true, celconfig.PerCallLimit)
		}
	}
	if v.validator, _, err = apiservervalidation.NewSchemaValidator(props); err != nil {
		return nil, fmt.Errorf("build the validator of version %s: %w", name, err)
	}
	if props != nil {
		if status, ok := props.Properties["status"]; ok {
			if v.statusValidator, _, err = apiservervalidation.NewSchemaValidator(&status); err != nil {
				return nil, fmt.Errorf("build the status validator of version %s: %w", name, err)
			}
		}
	}
	return v, nil
}

// ours reports whether u is of this version's group and kind, which is
// what the schema applies to.
func (v *version) ours(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == v.gvk.Group && gvk.Kind == v.gvk.Kind
}

// coerce does to u what decoding into a Go struct does to a built-in
// kind, as kube's schema coercer: fields the schema does not know are
// dropped, nulls where no null is allowed are dropped, and the metadata
// of embedded resources is made ObjectMeta. It returns the paths of the
// unknown fields when track is set.
func (v *version) coerce(u *unstructured.Unstructured, track bool) ([]string, error) {
	if v.structural == nil || !v.ours(u) {
		return nil, nil
	}
	// The root's apiVersion, kind and metadata are the REST layer's; the
	// algorithms below would drop or rewrite them.
	apiVersion, kind := u.GetAPIVersion(), u.GetKind()
	metadata, hasMetadata := u.Object["metadata"]
	var unknown []string
	if !v.preserveUnknownFields {
		unknown = structuralpruning.PruneWithOptions(u.Object, v.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: track})
		structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, v.structural)
	}
	ferr, paths := schemaobjectmeta.CoerceWithOptions(nil, u.Object, v.structural, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: track})
	if ferr != nil {
		return nil, ferr
	}
	unknown = append(unknown, paths...)
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	if hasMetadata {
		u.Object["metadata"] = metadata
	}
	return unknown, nil
}

// applyDefaults sets the schema's defaults that u lacks.
func (v *version) applyDefaults(u *unstructured.Unstructured) {
	if v.structural != nil && v.ours(u) {
		structuraldefaulting.Default(u.Object, v.structural)
	}
}
