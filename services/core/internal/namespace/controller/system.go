package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// SystemNamespaces are the namespaces a cluster has from the start, as
// kube-apiserver's system namespaces controller makes them.
var SystemNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem, metav1.NamespacePublic, corev1.NamespaceNodeLease}

// EnsureSystemNamespaces creates the SystemNamespaces that do not exist.
// Replicas may run it at once: a namespace another created is fine.
func EnsureSystemNamespaces(ctx context.Context, kube kubernetes.Interface) error {
	for _, name := range SystemNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create namespace %q: %w", name, err)
		}
	}
	return nil
}
