package corev1

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
)

type serviceAccountStrategy struct{}

// ServiceAccountStrategy keeps only the name of each secret a
// ServiceAccount refers to, as kube does: the secrets are in the account's
// own namespace, so the other reference fields mean nothing. Its names are
// DNS subdomains, the REST layer's default.
func ServiceAccountStrategy() resource.Strategy { return serviceAccountStrategy{} }

func (serviceAccountStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	cleanSecretReferences(obj.(*v1.ServiceAccount))
}

func (serviceAccountStrategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	cleanSecretReferences(obj.(*v1.ServiceAccount))
}

func cleanSecretReferences(sa *v1.ServiceAccount) {
	for i, ref := range sa.Secrets {
		sa.Secrets[i] = v1.ObjectReference{Name: ref.Name}
	}
}

func (serviceAccountStrategy) Validate(context.Context, runtime.Object) field.ErrorList { return nil }

func (serviceAccountStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
