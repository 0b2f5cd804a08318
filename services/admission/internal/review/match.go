package review

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selector parses s; a nil selector, which the API server defaults to {}
// before a configuration is stored, selects everything.
func Selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// MatchNamespace is kube's namespace matcher of admission policies: a
// cluster-scoped write always matches; a namespace being created or
// updated matches on its own new labels; any other write on its
// namespace's stored labels, read with get, a missing namespace being
// kube's 404. Its errors are status errors.
func MatchNamespace(ctx context.Context, get func(ctx context.Context, name string) (*corev1.Namespace, error), a *Attributes, s *metav1.LabelSelector) (bool, *apierrors.StatusError) {
	r := a.Request
	isNamespaces := r.Resource.Resource == "namespaces"
	if r.Namespace == "" && !isNamespaces {
		return true, nil
	}
	sel, err := Selector(s)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if sel.Empty() {
		return true, nil
	}
	if isNamespaces && r.SubResource == "" && (r.Operation == "CREATE" || r.Operation == "UPDATE") {
		if a.Object == nil {
			return false, apierrors.NewInternalError(errors.New("a namespace write without its object"))
		}
		return sel.Matches(labels.Set(a.Object.GetLabels())), nil
	}
	name := r.Namespace
	if isNamespaces && name == "" {
		// Kube gives a namespace's request its own name as namespace;
		// take the name should a caller leave the namespace empty.
		name = r.Name
	}
	ns, err := get(ctx, name)
	if apierrors.IsNotFound(err) {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return false, &apierrors.StatusError{ErrStatus: status.Status()}
		}
		return false, apierrors.NewInternalError(err)
	}
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}
