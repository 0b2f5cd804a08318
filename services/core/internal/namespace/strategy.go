package namespace

import (
	"context"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	genericvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// strategy holds kube's namespace rules. The REST layer keeps status and
// spec.finalizers on updates through the main resource, and lets /status
// and /finalize change only their field (the resource must declare both
// subresources).
type strategy struct{}

var (
	_ resource.Strategy    = strategy{}
	_ rest.NameValidator   = strategy{}
	_ rest.DeferredDeleter = strategy{}
)

// Strategy returns the create, update and delete rules of v1 namespaces.
func Strategy() resource.Strategy { return strategy{} }

// PrepareForCreate makes a new namespace Active and gives it the
// "kubernetes" finalizer, which the namespace deleter removes once the
// namespace is empty.
func (strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	ns := obj.(*corev1.Namespace)
	ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
	if !slices.Contains(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
		ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
	}
	nameLabel(ns)
}

// Validate checks a new namespace's finalizers; the REST layer checks
// its metadata, the name as a DNS-1123 label (ValidateName).
func (strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	var errs field.ErrorList
	for _, f := range ns.Spec.Finalizers {
		// Kube names the list, not the entry, on create.
		errs = append(errs, validateFinalizerName(string(f), field.NewPath("spec", "finalizers"))...)
	}
	return errs
}

// PrepareForUpdate keeps the name label, as kube's Canonicalize.
func (strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	nameLabel(obj.(*corev1.Namespace))
}

// ValidateUpdate checks the finalizers (which only /finalize changes)
// and that the phase agrees with the deletionTimestamp (which only
// /status can break), with kube's messages.
func (strategy) ValidateUpdate(_ context.Context, obj, _ runtime.Object) field.ErrorList {
	ns := obj.(*corev1.Namespace)
	var errs field.ErrorList
	path := field.NewPath("spec", "finalizers")
	for i, f := range ns.Spec.Finalizers {
		errs = append(errs, validateFinalizerName(string(f), path.Index(i))...)
	}
	phase := field.NewPath("status", "Phase")
	switch {
	case ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceActive:
		errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Active' if `deletionTimestamp` is empty"))
	case !ns.DeletionTimestamp.IsZero() && ns.Status.Phase != corev1.NamespaceTerminating:
		errs = append(errs, field.Invalid(phase, ns.Status.Phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
	}
	return errs
}

// ValidateName requires a DNS-1123 label, as kube's ValidateNamespaceName.
func (strategy) ValidateName(name string, prefix bool) []string {
	return genericvalidation.ValidateNamespaceName(name, prefix)
}

// PrepareForDelete turns a namespace Terminating when its deletion starts.
func (strategy) PrepareForDelete(obj runtime.Object) {
	obj.(*corev1.Namespace).Status.Phase = corev1.NamespaceTerminating
}

// Finalizing reports whether spec.finalizers still holds the namespace.
func (strategy) Finalizing(obj runtime.Object) bool {
	return len(obj.(*corev1.Namespace).Spec.Finalizers) != 0
}

// nameLabel sets kubernetes.io/metadata.name to the namespace's name, as
// kube does for every namespace.
func nameLabel(ns *corev1.Namespace) {
	if ns.Name == "" {
		return
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[corev1.LabelMetadataName] = ns.Name
}

// standardFinalizers are the finalizer names that need no domain.
var standardFinalizers = []string{string(corev1.FinalizerKubernetes), metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents}

// validateFinalizerName checks a finalizer name as kube's core
// validation: a qualified name, and one with a domain unless standard.
func validateFinalizerName(name string, path *field.Path) field.ErrorList {
	errs := genericvalidation.ValidateFinalizerName(name, path)
	if !strings.Contains(name, "/") && !slices.Contains(standardFinalizers, name) {
		errs = append(errs, field.Invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified"))
	}
	return errs
}
