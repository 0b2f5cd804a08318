package patch

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"kplane.dev/libs/apiserver/resource"
)

// Update records in obj's managedFields that manager changed the fields in
// which obj differs from live, through subresource ("" for the main
// resource). On create, live is nil (or an empty object of the kind). Like
// kube-apiserver, a failure to compute managed fields never fails the write:
// obj then keeps live's managedFields. Managed fields sent by the client that
// do not decode are replaced by live's, and an empty list resets them.
func (p *Patcher) Update(live, obj runtime.Object, manager, subresource string) (runtime.Object, error) {
	fm, err := p.fieldManager(subresource)
	if err != nil {
		return nil, err
	}
	if live == nil {
		live = p.objects.New()
	}
	p.setKind(live)
	p.setKind(obj)
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// fieldManager returns the field manager of a subresource.
func (p *Patcher) fieldManager(subresource string) (*managedfields.FieldManager, error) {
	fm, ok := p.managers[subresource]
	if !ok {
		return nil, fmt.Errorf("track managed fields of %s: resource %s has no subresource %q", p.gvk.Kind, p.gr, subresource)
	}
	return fm, nil
}

// setKind gives obj the resource's apiVersion and kind when it has none:
// objects read into typed structs may come without them, and the type
// converter finds a schema by them.
func (p *Patcher) setKind(obj runtime.Object) {
	if obj.GetObjectKind().GroupVersionKind().Empty() {
		obj.GetObjectKind().SetGroupVersionKind(p.gvk)
	}
}

// resets are the fields the main resource and each of its subresources
// leave alone. As kube-apiserver's strategies do, the main resource does
// not take ownership of status and /status does not of spec.
func resets(r *resource.Resource) map[string]map[fieldpath.APIVersion]fieldpath.Filter {
	version := fieldpath.APIVersion(r.GroupVersionKind().GroupVersion().String())
	subresources := map[string]map[fieldpath.APIVersion]fieldpath.Filter{"": nil}
	if r.Subresources.Status {
		subresources[""] = map[fieldpath.APIVersion]fieldpath.Filter{
			version: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status"))),
		}
		subresources["status"] = map[fieldpath.APIVersion]fieldpath.Filter{
			version: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("spec"))),
		}
	}
	if r.Subresources.Finalize {
		// /finalize changes spec.finalizers alone, as kube's namespace
		// finalize strategy, which resets status.
		subresources["finalize"] = map[fieldpath.APIVersion]fieldpath.Filter{
			version: fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status"))),
		}
	}
	return subresources
}

// newFieldManagers builds a field manager for each of subresources, with
// the fields it leaves alone.
func newFieldManagers(r *resource.Resource, tc managedfields.TypeConverter, k kindObjects, subresources map[string]map[fieldpath.APIVersion]fieldpath.Filter) (map[string]*managedfields.FieldManager, error) {
	gvk := r.GroupVersionKind()
	newManager := managedfields.NewDefaultFieldManager
	if !k.typed {
		newManager = managedfields.NewDefaultCRDFieldManager
	}
	managers := make(map[string]*managedfields.FieldManager, len(subresources))
	for sub, reset := range subresources {
		fm, err := newManager(tc, k, k, k, gvk, gvk.GroupVersion(), sub, reset)
		if err != nil {
			return nil, fmt.Errorf("build field manager of %s subresource %q: %w", gvk, sub, err)
		}
		managers[sub] = fm
	}
	return managers, nil
}

// newTypeConverter builds the structured-merge-diff types of the resource's
// kind from the definitions its schema reaches; a resource without a
// schema merges every field atomically, as kube does for a CRD without one.
func newTypeConverter(r *resource.Resource) (managedfields.TypeConverter, error) {
	if r.Schema == nil {
		return managedfields.NewDeducedTypeConverter(), nil
	}
	defs, err := reachable(r.Schema)
	if err != nil {
		return nil, err
	}
	tc, err := managedfields.NewTypeConverter(defs, false)
	if err != nil {
		return nil, fmt.Errorf("convert OpenAPI schema of %s: %w", r.GroupVersionKind(), err)
	}
	return tc, nil
}

// reachable returns the definitions the schema's Ref and OtherVersions
// refer to, transitively. Converting only those keeps building a
// resource's types proportional to its kind, not to every definition of
// its API package.
func reachable(s *resource.Schema) (map[string]*spec.Schema, error) {
	out := map[string]*spec.Schema{}
	var visit func(name string) error
	var walk func(sch *spec.Schema) error
	visit = func(name string) error {
		if _, ok := out[name]; ok {
			return nil
		}
		def, ok := s.Definitions[name]
		if !ok {
			return fmt.Errorf("resolve OpenAPI definition %q: not in the schema's definitions", name)
		}
		out[name] = def
		return walk(def)
	}
	walk = func(sch *spec.Schema) error {
		if sch == nil {
			return nil
		}
		if ref := sch.Ref.String(); ref != "" {
			if err := visit(strings.TrimPrefix(ref, "#/definitions/")); err != nil {
				return err
			}
		}
		for _, p := range sch.Properties {
			if err := walk(&p); err != nil {
				return err
			}
		}
		if sch.AdditionalProperties != nil {
			if err := walk(sch.AdditionalProperties.Schema); err != nil {
				return err
			}
		}
		if sch.Items != nil {
			if err := walk(sch.Items.Schema); err != nil {
				return err
			}
			for i := range sch.Items.Schemas {
				if err := walk(&sch.Items.Schemas[i]); err != nil {
					return err
				}
			}
		}
		for _, group := range [][]spec.Schema{sch.AllOf, sch.AnyOf, sch.OneOf} {
			for i := range group {
				if err := walk(&group[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, root := range append([]string{s.Ref}, s.OtherVersions...) {
		if err := visit(root); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// kindObjects is the ObjectCreater, ObjectConvertor and ObjectDefaulter the
// field managers need, for the kind and version a resource serves.
// Conversion moves between the resource's typed struct and the
// unstructured form structured-merge-diff produces, and to the kind's
// other versions when the resource's Objects convert to them; defaulting
// is the resource strategy's, which the REST layer runs after patching.
type kindObjects struct {
	objects resource.Objects
	gvk     schema.GroupVersionKind
	typed   bool
	// versions converts to the kind's other versions; nil when the
	// resource has no other version.
	versions resource.VersionConverter
}

var (
	_ runtime.ObjectCreater   = kindObjects{}
	_ runtime.ObjectConvertor = kindObjects{}
	_ runtime.ObjectDefaulter = kindObjects{}
)

func (k kindObjects) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	if gvk != k.gvk {
		return nil, fmt.Errorf("create object of kind %s: only %s is served here", gvk, k.gvk)
	}
	return k.objects.New(), nil
}

func (kindObjects) Default(runtime.Object) {}

func (k kindObjects) ConvertToVersion(in runtime.Object, target runtime.GroupVersioner) (runtime.Object, error) {
	gvk, ok := target.KindForGroupVersionKinds([]schema.GroupVersionKind{k.gvk})
	if !ok || (gvk != k.gvk && (k.versions == nil || gvk.GroupKind() != k.gvk.GroupKind())) {
		return nil, fmt.Errorf("convert %s to %v: only %s is served here", in.GetObjectKind().GroupVersionKind(), target, k.gvk)
	}
	if from := in.GetObjectKind().GroupVersionKind(); k.versions != nil && from.GroupKind() == gvk.GroupKind() && from.Version != gvk.Version {
		// The field managers read an entry recorded through another
		// version by converting the object to that version and back.
		out, err := k.versions.ConvertToVersion(in.DeepCopyObject(), gvk.GroupVersion())
		if err != nil {
			return nil, fmt.Errorf("convert %s to %s: %w", from, gvk.GroupVersion(), err)
		}
		in = out
	}
	if gvk != k.gvk {
		// Only custom resources have other versions, all unstructured.
		return in, nil
	}
	u, isUnstructured := in.(runtime.Unstructured)
	if !k.typed || !isUnstructured {
		in.GetObjectKind().SetGroupVersionKind(k.gvk)
		return in, nil
	}
	out := k.objects.New()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), out); err != nil {
		return nil, fmt.Errorf("convert %s to its typed form: %w", k.gvk.Kind, err)
	}
	out.GetObjectKind().SetGroupVersionKind(k.gvk)
	return out, nil
}

func (k kindObjects) Convert(in, out, _ any) error {
	return fmt.Errorf("convert %T to %T: only conversion to %s is served here", in, out, k.gvk)
}

func (k kindObjects) ConvertFieldLabel(gvk schema.GroupVersionKind, label, _ string) (string, string, error) {
	return "", "", fmt.Errorf("convert field label %q of %s: field labels are not converted here", label, gvk)
}
