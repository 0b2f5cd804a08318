package openapi

import (
	"fmt"
	"strings"

	"k8s.io/kube-openapi/pkg/openapiconv"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
)

const defPrefix = "#/definitions/"

// documents are the OpenAPI documents of one set of resources.
type documents struct {
	// v3 is each group-version's document, keyed as the /openapi/v3 index
	// keys it ("api/v1", "apis/<group>/<version>").
	v3 map[string]*spec3.OpenAPI
	// v2 is the merged Swagger 2.0 document.
	v2 *spec.Swagger
}

// groupVersion gathers one group-version's paths and definitions.
type groupVersion struct {
	paths       map[string]spec.PathItem
	definitions spec.Definitions
	// v2 are the definitions of the v2 document, which differ from
	// definitions for resources that declare V2Definitions.
	v2 spec.Definitions
}

func build(resources []*resource.Resource, info *spec.Info) (*documents, error) {
	common, err := builtin.Definitions()
	if err != nil {
		return nil, fmt.Errorf("load built-in definitions: %w", err)
	}
	gvs := map[string]*groupVersion{}
	for _, r := range resources {
		gvr := r.GroupVersionResource
		key := "apis/" + gvr.Group + "/" + gvr.Version
		if gvr.Group == "" {
			key = "api/" + gvr.Version
		}
		gv, ok := gvs[key]
		if !ok {
			gv = &groupVersion{paths: map[string]spec.PathItem{}, definitions: spec.Definitions{}, v2: spec.Definitions{}}
			gvs[key] = gv
		}
		names, own := kindDefinitions(r)
		resourcePaths(gv.paths, r, names)
		var declared, declaredV2 map[string]*spec.Schema
		if r.Schema != nil {
			declared, declaredV2 = r.Schema.Definitions, r.Schema.Definitions
			if r.Schema.V2Definitions != nil {
				declaredV2 = r.Schema.V2Definitions
			}
		}
		roots := []string{names.object, names.list, defStatus, defDeleteOptions, defWatchEvent, defPatch}
		if !r.Stored() {
			// A review is only created: it has no list, and nothing is
			// deleted, watched or patched.
			roots = []string{names.object, defStatus}
		}
		if err := collect(gv.definitions, roots, own, declared, common); err != nil {
			return nil, fmt.Errorf("collect definitions of %s: %w", r.GroupResource(), err)
		}
		if err := collect(gv.v2, roots, own, declaredV2, common); err != nil {
			return nil, fmt.Errorf("collect v2 definitions of %s: %w", r.GroupResource(), err)
		}
		if r.Subresources.Scale != nil {
			for _, defs := range []spec.Definitions{gv.definitions, gv.v2} {
				if err := collect(defs, []string{defScale}, common); err != nil {
					return nil, fmt.Errorf("collect definitions of %s/scale: %w", r.GroupResource(), err)
				}
			}
		}
		for _, a := range r.Subresources.Actions {
			if a.Schema == nil {
				continue
			}
			if err := collect(gv.definitions, []string{a.Schema.Ref}, a.Schema.Definitions, common); err != nil {
				return nil, fmt.Errorf("collect definitions of %s/%s: %w", r.GroupResource(), a.Name, err)
			}
			if err := collect(gv.v2, []string{a.Schema.Ref}, a.Schema.Definitions, common); err != nil {
				return nil, fmt.Errorf("collect v2 definitions of %s/%s: %w", r.GroupResource(), a.Name, err)
			}
		}
	}

	d := &documents{v3: map[string]*spec3.OpenAPI{}, v2: newSwagger(info)}
	for key, gv := range gvs {
		s := newSwagger(info)
		s.Paths.Paths = gv.paths
		s.Definitions = gv.definitions
		v3 := openapiconv.ConvertV2ToV3(s)
		v3.Components.SecuritySchemes = spec3.SecuritySchemes{"BearerToken": bearerToken()}
		v3.SecurityRequirement = []map[string][]string{{"BearerToken": {}}}
		d.v3[key] = v3
		for p, item := range gv.paths {
			d.v2.Paths.Paths[p] = item
		}
		for name, def := range gv.v2 {
			d.v2.Definitions[name] = def
		}
	}
	return d, nil
}

func newSwagger(info *spec.Info) *spec.Swagger {
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        info,
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
		SecurityDefinitions: spec.SecurityDefinitions{"BearerToken": &spec.SecurityScheme{SecuritySchemeProps: spec.SecuritySchemeProps{
			Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
		}}},
		Security: []map[string][]string{{"BearerToken": {}}},
	}}
}

func bearerToken() *spec3.SecurityScheme {
	return &spec3.SecurityScheme{SecuritySchemeProps: spec3.SecuritySchemeProps{
		Type: "apiKey", Name: "authorization", In: "header", Description: "Bearer Token authentication",
	}}
}

// kindDefinitions names the definitions of r's kind and list, and makes
// those its declaration does not have: a schema accepting any object for a
// kind without one, and the list of a kind whose definitions lack it, both
// as kube-apiserver makes them for custom resources.
func kindDefinitions(r *resource.Resource) (kindNames, map[string]*spec.Schema) {
	gvk := r.GroupVersionKind()
	listKind := r.ListKindName()
	own := map[string]*spec.Schema{}
	var names kindNames
	if r.Schema != nil {
		names.object = r.Schema.Ref
		names.list = strings.TrimSuffix(r.Schema.Ref, r.Kind) + listKind
		if _, ok := r.Schema.Definitions[names.list]; ok {
			return names, own
		}
	} else {
		names.object = definitionName(gvk.Group, gvk.Version, r.Kind)
		names.list = definitionName(gvk.Group, gvk.Version, listKind)
		own[names.object] = anyObject(gvk.Group, gvk.Version, r.Kind)
	}

	list := &spec.Schema{SchemaProps: spec.SchemaProps{
		Description: listKind + " is a list of " + r.Kind,
		Type:        spec.StringOrArray{"object"},
		Required:    []string{"items"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty().WithDescription("APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"),
			"kind":       *spec.StringProperty().WithDescription("Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"),
			"items": {SchemaProps: spec.SchemaProps{
				Description: "List of " + strings.ToLower(r.GroupResource().Resource) + ". More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md",
				Type:        spec.StringOrArray{"array"},
				Items:       &spec.SchemaOrArray{Schema: refSchema(names.object)},
			}},
			"metadata": *refSchema(defListMeta).WithDescription("Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"),
		},
	}}
	list.AddExtension(extGVK, []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": listKind}})
	own[names.list] = list
	return names, own
}

// anyObject is the schema of a kind declared without one: any fields are
// kept, only the metadata is typed.
func anyObject(group, version, kind string) *spec.Schema {
	s := &spec.Schema{SchemaProps: spec.SchemaProps{
		Type: spec.StringOrArray{"object"},
		Properties: map[string]spec.Schema{
			"apiVersion": *spec.StringProperty(),
			"kind":       *spec.StringProperty(),
			"metadata":   *refSchema(defObjectMeta),
		},
	}}
	s.AddExtension("x-kubernetes-preserve-unknown-fields", true)
	s.AddExtension(extGVK, []any{map[string]any{"group": group, "version": version, "kind": kind}})
	return s
}

// definitionName is kube-apiserver's definition name for a kind with no Go
// type: the group reversed, then version and kind (com.example.v1.Widget).
func definitionName(group, version, kind string) string {
	parts := strings.Split(group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(append(parts, version, kind), ".")
}

// collect adds to defs the named definitions and everything they refer
// to, each from the first source holding it.
func collect(defs spec.Definitions, roots []string, sources ...map[string]*spec.Schema) error {
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if _, done := defs[name]; done {
			continue
		}
		var found *spec.Schema
		for _, src := range sources {
			if s, ok := src[name]; ok {
				found = s
				break
			}
		}
		if found == nil {
			return fmt.Errorf("no definition %q", name)
		}
		defs[name] = *found
		refs(found, func(ref string) {
			queue = append(queue, strings.TrimPrefix(ref, defPrefix))
		})
	}
	return nil
}

// refs calls f with every reference in s.
func refs(s *spec.Schema, f func(string)) {
	if s == nil {
		return
	}
	if r := s.Ref.String(); r != "" {
		f(r)
	}
	for _, p := range s.Properties {
		refs(&p, f)
	}
	if s.Items != nil {
		refs(s.Items.Schema, f)
		for _, i := range s.Items.Schemas {
			refs(&i, f)
		}
	}
	if s.AdditionalProperties != nil {
		refs(s.AdditionalProperties.Schema, f)
	}
	for _, list := range [][]spec.Schema{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			refs(&sub, f)
		}
	}
	refs(s.Not, f)
}
