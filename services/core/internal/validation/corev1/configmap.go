package corev1

import (
	"context"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
)

// immutableMessage is kube's refusal to change data frozen by `immutable`.
const immutableMessage = "field is immutable when `immutable` is set"

type configMapStrategy struct{}

// ConfigMapStrategy validates ConfigMaps: key names, 1 MiB of data in
// total, and `immutable: true` freezing the data.
func ConfigMapStrategy() resource.Strategy { return configMapStrategy{} }

func (configMapStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (configMapStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (configMapStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateConfigMap(obj.(*v1.ConfigMap))
}

func (configMapStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	cm, oldCM := obj.(*v1.ConfigMap), old.(*v1.ConfigMap)
	var errs field.ErrorList
	if isTrue(oldCM.Immutable) {
		if !isTrue(cm.Immutable) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
		}
		if !reflect.DeepEqual(cm.Data, oldCM.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
		}
		if !reflect.DeepEqual(cm.BinaryData, oldCM.BinaryData) {
			errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableMessage))
		}
	}
	return append(errs, validateConfigMap(cm)...)
}

func validateConfigMap(cm *v1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for _, key := range sortedKeys(cm.Data) {
		path := field.NewPath("data").Key(key)
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(path, key, msg))
		}
		if _, ok := cm.BinaryData[key]; ok {
			errs = append(errs, field.Invalid(path, key, "duplicate of key present in binaryData"))
		}
		size += len(cm.Data[key])
	}
	for _, key := range sortedKeys(cm.BinaryData) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(key), key, msg))
		}
		size += len(cm.BinaryData[key])
	}
	if size > v1.MaxSecretSize {
		// An empty path: the limit is on the whole object, as kube says.
		errs = append(errs, field.TooLong(field.NewPath(""), "", v1.MaxSecretSize))
	}
	return errs
}

func isTrue(b *bool) bool { return b != nil && *b }
