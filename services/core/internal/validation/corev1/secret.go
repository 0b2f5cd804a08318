package corev1

import (
	"context"
	"encoding/json"
	"reflect"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
)

// redacted stands for a secret's contents in an error, as kube writes it.
const redacted = "<secret contents redacted>"

type secretStrategy struct{}

// SecretStrategy defaults and validates Secrets: stringData merged into
// data, type Opaque by default, key names, 1 MiB of data, the keys each
// type requires, an immutable type and `immutable: true` freezing data.
func SecretStrategy() resource.Strategy { return secretStrategy{} }

func (secretStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	normalizeSecret(obj.(*v1.Secret))
}

func (secretStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	normalizeSecret(obj.(*v1.Secret))
}

// normalizeSecret does what kube's conversion to its internal form and
// defaulting do: stringData is write-only, folded into data over any value
// of the same key, and a secret without a type is Opaque.
func normalizeSecret(s *v1.Secret) {
	if len(s.StringData) > 0 {
		if s.Data == nil {
			s.Data = make(map[string][]byte, len(s.StringData))
		}
		for k, v := range s.StringData {
			s.Data[k] = []byte(v)
		}
	}
	s.StringData = nil
	if s.Type == "" {
		s.Type = v1.SecretTypeOpaque
	}
}

func (secretStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validateSecret(obj.(*v1.Secret))
}

func (secretStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	s, oldS := obj.(*v1.Secret), old.(*v1.Secret)
	errs := apivalidation.ValidateImmutableField(s.Type, oldS.Type, field.NewPath("type"))
	if isTrue(oldS.Immutable) {
		if !isTrue(s.Immutable) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
		}
		if !reflect.DeepEqual(s.Data, oldS.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
		}
	}
	return append(errs, validateSecret(s)...)
}

func validateSecret(s *v1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for _, key := range sortedKeys(s.Data) {
		for _, msg := range validation.IsConfigMapKey(key) {
			errs = append(errs, field.Invalid(data.Key(key), key, msg))
		}
		size += len(s.Data[key])
	}
	if size > v1.MaxSecretSize {
		errs = append(errs, field.TooLong(data, "", v1.MaxSecretSize))
	}

	switch s.Type {
	case v1.SecretTypeServiceAccountToken:
		// Only the account's name is required: its uid and the token
		// are a controller's to add.
		if s.Annotations[v1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(v1.ServiceAccountNameKey), ""))
		}
	case v1.SecretTypeDockercfg:
		errs = append(errs, requireJSON(s.Data, data, v1.DockerConfigKey)...)
	case v1.SecretTypeDockerConfigJson:
		errs = append(errs, requireJSON(s.Data, data, v1.DockerConfigJsonKey)...)
	case v1.SecretTypeBasicAuth:
		// Either may be empty, but one of them must be there.
		_, user := s.Data[v1.BasicAuthUsernameKey]
		_, password := s.Data[v1.BasicAuthPasswordKey]
		if !user && !password {
			errs = append(errs,
				field.Required(data.Key(v1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(v1.BasicAuthPasswordKey), ""))
		}
	case v1.SecretTypeSSHAuth:
		if len(s.Data[v1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(v1.SSHAuthPrivateKey), ""))
		}
	case v1.SecretTypeTLS:
		for _, key := range []string{v1.TLSCertKey, v1.TLSPrivateKeyKey} {
			if _, ok := s.Data[key]; !ok {
				errs = append(errs, field.Required(data.Key(key), ""))
			}
		}
	}
	return errs
}

// requireJSON checks that data holds key and that its value is a JSON
// object, as docker config secrets must.
func requireJSON(data map[string][]byte, path *field.Path, key string) field.ErrorList {
	value, ok := data[key]
	if !ok {
		return field.ErrorList{field.Required(path.Key(key), "")}
	}
	if err := json.Unmarshal(value, &map[string]any{}); err != nil {
		return field.ErrorList{field.Invalid(path.Key(key), redacted, err.Error())}
	}
	return nil
}
