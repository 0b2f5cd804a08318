package mutating

import (
	"errors"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured/unstructuredscheme"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"kplane.dev/libs/apiserver/openapi/builtin"
)

// typeConverters give ApplyConfiguration mutations the schema of the
// object they merge into: kube's OpenAPI models for the built-in kinds,
// a schema deduced from the object itself for any other kind.
type typeConverters struct {
	builtin func() (managedfields.TypeConverter, error)
	deduced managedfields.TypeConverter
}

func newTypeConverters() *typeConverters {
	return &typeConverters{
		// Built once, on the first write of a built-in kind.
		builtin: sync.OnceValues(func() (managedfields.TypeConverter, error) {
			defs, err := builtin.Definitions()
			if err != nil {
				return nil, err
			}
			return managedfields.NewTypeConverter(defs, false)
		}),
		deduced: managedfields.NewDeducedTypeConverter(),
	}
}

func (t *typeConverters) forKind(gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	if _, err := builtin.Schema(gvk); err != nil {
		return t.deduced, nil
	}
	return t.builtin()
}

// unstructuredObjects are the object interfaces kube's patchers need for
// objects that, in this service, are always unstructured.
type unstructuredObjects struct{}

func (unstructuredObjects) GetObjectCreater() runtime.ObjectCreater {
	return unstructuredscheme.NewUnstructuredCreator()
}

func (unstructuredObjects) GetObjectTyper() runtime.ObjectTyper {
	return unstructuredscheme.NewUnstructuredObjectTyper()
}

func (unstructuredObjects) GetObjectDefaulter() runtime.ObjectDefaulter { return noDefaults{} }

func (unstructuredObjects) GetObjectConvertor() runtime.ObjectConvertor { return noConversion{} }

func (unstructuredObjects) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return runtime.NewEquivalentResourceRegistry()
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// noConversion refuses conversion: a write is mutated in the version it
// was made in.
type noConversion struct{}

var errNoConversion = errors.New("mutating admission policies convert no objects")

func (noConversion) Convert(_, _, _ any) error { return errNoConversion }

func (noConversion) ConvertToVersion(runtime.Object, runtime.GroupVersioner) (runtime.Object, error) {
	return nil, errNoConversion
}

func (noConversion) ConvertFieldLabel(schema.GroupVersionKind, string, string) (string, string, error) {
	return "", "", errNoConversion
}
