package builtin

import (
	"fmt"
	"sort"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/resource"
)

// ExtensionGVK is the extension naming the group-version-kinds a
// definition serves, as kube-apiserver writes it.
const ExtensionGVK = "x-kubernetes-group-version-kind"

// catalog is the one shared set of definitions and the index of kinds.
type catalog struct {
	definitions map[string]*spec.Schema
	kinds       map[schema.GroupVersionKind]string
}

// load builds the catalog on first use. The generated definitions are
// immutable program data, so one copy serves the whole process.
var load = sync.OnceValues(build)

// Definitions returns every built-in definition. The map and its schemas
// are shared: callers must not modify them.
func Definitions() (map[string]*spec.Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	return c.definitions, nil
}

// Schema returns the schema of a built-in kind, for a resource declaration.
// Its Definitions is the shared map of every built-in definition.
func Schema(gvk schema.GroupVersionKind) (*resource.Schema, error) {
	c, err := load()
	if err != nil {
		return nil, err
	}
	name, ok := c.kinds[gvk]
	if !ok {
		return nil, fmt.Errorf("look up OpenAPI definition of %s: no built-in definition", gvk)
	}
	return &resource.Schema{Ref: name, Definitions: c.definitions}, nil
}

func build() (*catalog, error) {
	// Every API package whose definitions are generated, so that each
	// kind's definition learns its group-version-kinds.
	addToScheme := []func(*runtime.Scheme) error{
		corev1.AddToScheme,
		coordinationv1.AddToScheme,
		eventsv1.AddToScheme,
		rbacv1.AddToScheme,
		admissionregistrationv1.AddToScheme,
		authenticationv1.AddToScheme,
		authorizationv1.AddToScheme,
		autoscalingv1.AddToScheme,
		apiextensionsv1.AddToScheme,
		apiregistrationv1.AddToScheme,
	}
	scheme := runtime.NewScheme()
	for _, add := range addToScheme {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("register built-in types: %w", err)
		}
	}

	ref := func(name string) spec.Ref {
		return spec.MustCreateRef("#/definitions/" + name)
	}
	generated := GetOpenAPIDefinitions(ref)
	c := &catalog{
		definitions: make(map[string]*spec.Schema, len(generated)),
		kinds:       map[schema.GroupVersionKind]string{},
	}
	for name, def := range generated {
		s := def.Schema
		c.definitions[name] = &s
	}

	// A definition serves every group-version-kind the scheme maps to it
	// (DeleteOptions serves one per group), sorted as kube sorts them.
	gvks := map[string][]schema.GroupVersionKind{}
	for gvk := range scheme.AllKnownTypes() {
		name, err := scheme.ToOpenAPIDefinitionName(gvk)
		if err != nil {
			return nil, fmt.Errorf("name OpenAPI definition of %s: %w", gvk, err)
		}
		if _, ok := c.definitions[name]; !ok {
			continue
		}
		gvks[name] = append(gvks[name], gvk)
		c.kinds[gvk] = name
	}
	for name, list := range gvks {
		sort.Slice(list, func(i, j int) bool {
			a, b := list[i], list[j]
			if a.Group != b.Group {
				return a.Group < b.Group
			}
			if a.Version != b.Version {
				return a.Version < b.Version
			}
			return a.Kind < b.Kind
		})
		ext := make([]any, 0, len(list))
		for _, gvk := range list {
			ext = append(ext, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
		c.definitions[name].AddExtension(ExtensionGVK, ext)
	}
	return c, nil
}
