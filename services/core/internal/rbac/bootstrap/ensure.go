package bootstrap

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Ensure creates every object of the default policy that does not exist.
// It reads before it writes, so replicas that start together mostly only
// read, and a create that loses a race to another replica is not an error.
func Ensure(ctx context.Context, kube kubernetes.Interface) error {
	roles := kube.RbacV1().ClusterRoles()
	for _, r := range ClusterRoles() {
		if _, err := roles.Get(ctx, r.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err != nil {
				return fmt.Errorf("read cluster role %s: %w", r.Name, err)
			}
			continue
		}
		if _, err := roles.Create(ctx, &r, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create cluster role %s: %w", r.Name, err)
		}
	}
	bindings := kube.RbacV1().ClusterRoleBindings()
	for _, b := range ClusterRoleBindings() {
		if _, err := bindings.Get(ctx, b.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			if err != nil {
				return fmt.Errorf("read cluster role binding %s: %w", b.Name, err)
			}
			continue
		}
		if _, err := bindings.Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create cluster role binding %s: %w", b.Name, err)
		}
	}
	return nil
}
