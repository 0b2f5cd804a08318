package customresource

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubeversion "k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/util/jsonpath"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/storage"
)

// Converters make the converter between a CRD's versions.
type Converters interface {
	NewConverter(crd *apiextensionsv1.CustomResourceDefinition) (safe, unsafe runtime.ObjectConvertor, err error)
}

// Resources declares every served version of crd, under the names it
// was accepted with. Ages are measured with c.
func Resources(crd *apiextensionsv1.CustomResourceDefinition, converters Converters, c clock.PassiveClock) ([]*resource.Resource, error) {
	_, converter, err := converters.NewConverter(crd)
	if err != nil {
		return nil, fmt.Errorf("build the converter of %s: %w", crd.Name, err)
	}
	names := crd.Status.AcceptedNames
	// The store is rebuilt, and objects read anew, when what decoding
	// depends on changes: the spec (its generation) or the CRD itself.
	storeGeneration := fmt.Sprintf("%s/%d", crd.UID, crd.Generation)
	schemas, err := openAPISchemas(crd)
	if err != nil {
		return nil, err
	}
	var out []*resource.Resource
	for _, ver := range crd.Spec.Versions {
		if !ver.Served {
			continue
		}
		v, err := newVersion(crd, ver.Name, converter)
		if err != nil {
			return nil, fmt.Errorf("serve %s version %s: %w", crd.Name, ver.Name, err)
		}
		gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: ver.Name, Resource: names.Plural}
		columns, err := printerColumns(crd, ver.Name, c)
		if err != nil {
			return nil, err
		}
		subresources, err := apihelpers.GetSubresourcesForVersion(crd, ver.Name)
		if err != nil {
			return nil, err
		}
		sch := schemas[ver.Name]
		r := &resource.Resource{
			GroupVersionResource: gvr,
			Kind:                 names.Kind,
			ListKind:             names.ListKind,
			Singular:             names.Singular,
			Namespaced:           crd.Spec.Scope == apiextensionsv1.NamespaceScoped,
			ShortNames:           names.ShortNames,
			Categories:           names.Categories,
			Subresources:         subresourcesOf(subresources),
			Generation:           true,
			Columns:              columns,
			Schema:               sch,
			Objects:              &Objects{Unstructured: objects.NewUnstructured(v.gvk, names.ListKind), v: v},
			Strategy:             &Strategy{v: v},
			StorageVersion:       v.storageGV.Version,
			StoreGeneration:      storeGeneration,
		}
		if ver.Deprecated {
			msg := defaultDeprecationWarning(ver.Name, crd.Spec)
			if ver.DeprecationWarning != nil {
				msg = *ver.DeprecationWarning
			}
			r.Warnings = []string{msg}
		}
		if attrs := selectableFields(ver.SelectableFields, r.Namespaced); attrs != nil {
			r.Attrs = attrs
		}
		out = append(out, r)
	}
	if len(out) > 1 {
		definition := conversionDefinition(crd)
		for _, r := range out {
			r.Definition = definition
			for _, other := range out {
				if other != r {
					r.Equivalents = append(r.Equivalents, resource.Equivalent{Resource: other.GroupVersionResource, Kind: other.GroupVersionKind()})
				}
			}
		}
	}
	return out, nil
}

// conversionDefinition is crd cut to what kube's converter reads, which
// admission receives with every write of a version to convert it to
// another: the schemas, often most of a CRD, are left out.
func conversionDefinition(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	out := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: crd.Name, UID: crd.UID, Generation: crd.Generation},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group:      crd.Spec.Group,
			Names:      crd.Status.AcceptedNames,
			Scope:      crd.Spec.Scope,
			Conversion: crd.Spec.Conversion.DeepCopy(),
		},
	}
	for _, v := range crd.Spec.Versions {
		out.Spec.Versions = append(out.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
			Name: v.Name, Served: v.Served, Storage: v.Storage, Subresources: v.Subresources.DeepCopy(), SelectableFields: v.SelectableFields,
		})
	}
	return out
}

// printerColumns are the version's additionalPrinterColumns, or kube's
// default AGE column.
func printerColumns(crd *apiextensionsv1.CustomResourceDefinition, version string, c clock.PassiveClock) ([]resource.Column, error) {
	var defs []apiextensionsv1.CustomResourceColumnDefinition
	for _, v := range crd.Spec.Versions {
		if v.Name == version {
			defs = v.AdditionalPrinterColumns
		}
	}
	if len(defs) == 0 {
		defs = []apiextensionsv1.CustomResourceColumnDefinition{{
			Name:        "Age",
			Type:        "date",
			Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"],
			JSONPath:    ".metadata.creationTimestamp",
		}}
	}
	columns := make([]resource.Column, 0, len(defs))
	for _, d := range defs {
		cell, err := resource.NewJSONPathCell(d.JSONPath, d.Type, c)
		if err != nil {
			return nil, fmt.Errorf("column %q of %s version %s: %w", d.Name, crd.Name, version, err)
		}
		columns = append(columns, resource.Column{
			TableColumnDefinition: metav1.TableColumnDefinition{Name: d.Name, Type: d.Type, Format: d.Format, Description: d.Description, Priority: d.Priority},
			Cell:                  cell,
		})
	}
	return columns, nil
}

// selectableFields returns the attributes of a version with
// selectableFields: the metadata fields and each selectable field's
// value, as kube's field set for a custom resource; nil without any.
func selectableFields(sf []apiextensionsv1.SelectableField, namespaced bool) storage.AttrFunc {
	if len(sf) == 0 {
		return nil
	}
	type path struct {
		label string
		jp    *jsonpath.JSONPath
	}
	paths := make([]path, 0, len(sf))
	for _, f := range sf {
		jp := jsonpath.New(f.JSONPath)
		jp.AllowMissingKeys(true)
		// Validation admitted the path.
		if err := jp.Parse("{" + f.JSONPath + "}"); err != nil {
			continue
		}
		paths = append(paths, path{label: strings.TrimPrefix(f.JSONPath, "."), jp: jp})
	}
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil, err
		}
		fs := fields.Set{"metadata.name": m.GetName()}
		if namespaced {
			fs["metadata.namespace"] = m.GetNamespace()
		}
		content := obj.(runtime.Unstructured).UnstructuredContent()
		for _, p := range paths {
			fs[p.label] = ""
			results, err := p.jp.FindResults(content)
			if err != nil || len(results) == 0 || len(results[0]) == 0 {
				continue
			}
			// A null selects as a missing field, and values print as
			// kube prints them (fmt.Sprint), which a selector must match.
			if v := results[0][0].Interface(); v != nil {
				fs[p.label] = fmt.Sprint(v)
			}
		}
		return labels.Set(m.GetLabels()), fs, nil
	}
}

// openAPISchemas are the schemas of every version of crd (served or not:
// managedFields entries may have been recorded through any), by version,
// each with the definitions of the others for the field managers; a
// version without a schema has none.
func openAPISchemas(crd *apiextensionsv1.CustomResourceDefinition) (map[string]*resource.Schema, error) {
	out := map[string]*resource.Schema{}
	for _, ver := range crd.Spec.Versions {
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: ver.Name, Kind: crd.Status.AcceptedNames.Kind}
		sch, err := openAPISchema(crd, ver.Name, gvk)
		if err != nil {
			return nil, err
		}
		if sch != nil {
			out[ver.Name] = sch
		}
	}
	for name, sch := range out {
		for other, o := range out {
			if other == name {
				continue
			}
			sch.Definitions[o.Ref] = o.Definitions[o.Ref]
			sch.OtherVersions = append(sch.OtherVersions, o.Ref)
		}
		slices.Sort(sch.OtherVersions)
	}
	return out, nil
}

// definitionName is kube's definition name of a kind without a Go type:
// the group reversed, then version and kind (com.example.v1.Widget).
func definitionName(gvk schema.GroupVersionKind) string {
	parts := strings.Split(gvk.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(append(parts, gvk.Version, gvk.Kind), ".")
}

// subresourcesOf declares a version's /status and /scale.
func subresourcesOf(s *apiextensionsv1.CustomResourceSubresources) resource.Subresources {
	var out resource.Subresources
	if s == nil {
		return out
	}
	out.Status = s.Status != nil
	if sc := s.Scale; sc != nil {
		out.Scale = &resource.Scale{SpecReplicasPath: sc.SpecReplicasPath, StatusReplicasPath: sc.StatusReplicasPath}
		if sc.LabelSelectorPath != nil {
			out.Scale.LabelSelectorPath = *sc.LabelSelectorPath
		}
	}
	return out
}

// defaultDeprecationWarning is kube's warning for a deprecated version
// without a deprecationWarning of its own: it names the newest served
// version that is not deprecated and newer, if any.
func defaultDeprecationWarning(deprecated string, spec apiextensionsv1.CustomResourceDefinitionSpec) string {
	msg := fmt.Sprintf("%s/%s %s is deprecated", spec.Group, deprecated, spec.Names.Kind)
	newest := ""
	for _, v := range spec.Versions {
		if !v.Served || v.Deprecated || kubeversion.CompareKubeAwareVersionStrings(deprecated, v.Name) >= 0 {
			continue
		}
		if newest == "" || kubeversion.CompareKubeAwareVersionStrings(v.Name, newest) > 0 {
			newest = v.Name
		}
	}
	if newest == "" {
		return msg
	}
	return msg + fmt.Sprintf("; use %s/%s %s", spec.Group, newest, spec.Names.Kind)
}
