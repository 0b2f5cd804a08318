package rbac

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// RoleStrategy returns the rules of roles.
func RoleStrategy() resource.Strategy { return roleStrategy{} }

// ClusterRoleStrategy returns the rules of cluster roles.
func ClusterRoleStrategy() resource.Strategy { return clusterRoleStrategy{} }

// RoleBindingStrategy returns the rules of role bindings.
func RoleBindingStrategy() resource.Strategy { return roleBindingStrategy{} }

// ClusterRoleBindingStrategy returns the rules of cluster role bindings.
func ClusterRoleBindingStrategy() resource.Strategy { return clusterRoleBindingStrategy{} }

var (
	_ rest.NameValidator = roleStrategy{}
	_ rest.NameValidator = clusterRoleStrategy{}
	_ rest.NameValidator = roleBindingStrategy{}
	_ rest.NameValidator = clusterRoleBindingStrategy{}
)

// validateName is kube's ValidateRBACName: RBAC objects only need names
// that fit in a URL path segment, so "system:controller:foo" is valid.
// Kube checks a generateName by the same rule as a name.
func validateName(name string, _ bool) []string {
	return path.IsValidPathSegmentName(name)
}

// wrongType is the error for an object the strategy was not built for,
// a wiring mistake that must not pass as valid.
func wrongType(obj runtime.Object, want string) field.ErrorList {
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("got %T, want %s", obj, want))}
}

type roleStrategy struct{}

func (roleStrategy) ValidateName(name string, prefix bool) []string {
	return validateName(name, prefix)
}

// AllowCreateOnUpdate lets a PUT create, as kube does for RBAC objects
// (kubectl auth reconcile relies on it).
func (roleStrategy) AllowCreateOnUpdate() bool { return true }

func (roleStrategy) PrepareForCreate(context.Context, runtime.Object) {}

func (roleStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (roleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	r, ok := obj.(*rbacv1.Role)
	if !ok {
		return wrongType(obj, "*rbacv1.Role")
	}
	return validateRules(r.Rules, true)
}

func (s roleStrategy) ValidateUpdate(ctx context.Context, obj, _ runtime.Object) field.ErrorList {
	return s.Validate(ctx, obj)
}

type clusterRoleStrategy struct{}

func (clusterRoleStrategy) ValidateName(name string, prefix bool) []string {
	return validateName(name, prefix)
}

// AllowCreateOnUpdate lets a PUT create, as kube does for RBAC objects
// (kubectl auth reconcile relies on it).
func (clusterRoleStrategy) AllowCreateOnUpdate() bool { return true }

func (clusterRoleStrategy) PrepareForCreate(context.Context, runtime.Object) {}

func (clusterRoleStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}

func (clusterRoleStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	r, ok := obj.(*rbacv1.ClusterRole)
	if !ok {
		return wrongType(obj, "*rbacv1.ClusterRole")
	}
	return validateClusterRole(r, false)
}

func (clusterRoleStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	r, ok := obj.(*rbacv1.ClusterRole)
	if !ok {
		return wrongType(obj, "*rbacv1.ClusterRole")
	}
	o, ok := old.(*rbacv1.ClusterRole)
	if !ok {
		return wrongType(old, "*rbacv1.ClusterRole")
	}
	return validateClusterRole(r, hasInvalidLabelValue(o))
}

type roleBindingStrategy struct{}

func (roleBindingStrategy) ValidateName(name string, prefix bool) []string {
	return validateName(name, prefix)
}

// AllowCreateOnUpdate lets a PUT create, as kube does for RBAC objects
// (kubectl auth reconcile relies on it).
func (roleBindingStrategy) AllowCreateOnUpdate() bool { return true }

func (roleBindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if b, ok := obj.(*rbacv1.RoleBinding); ok {
		defaultBinding(&b.RoleRef, b.Subjects)
	}
}

func (s roleBindingStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (roleBindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		return wrongType(obj, "*rbacv1.RoleBinding")
	}
	return validateBinding(b.RoleRef, b.Subjects, true)
}

func (s roleBindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	b, ok := obj.(*rbacv1.RoleBinding)
	if !ok {
		return errs
	}
	o, ok := old.(*rbacv1.RoleBinding)
	if !ok {
		return append(errs, wrongType(old, "*rbacv1.RoleBinding")...)
	}
	return append(errs, validateRoleRefUpdate(b.RoleRef, o.RoleRef)...)
}

type clusterRoleBindingStrategy struct{}

func (clusterRoleBindingStrategy) ValidateName(name string, prefix bool) []string {
	return validateName(name, prefix)
}

// AllowCreateOnUpdate lets a PUT create, as kube does for RBAC objects
// (kubectl auth reconcile relies on it).
func (clusterRoleBindingStrategy) AllowCreateOnUpdate() bool { return true }

func (clusterRoleBindingStrategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	if b, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
		defaultBinding(&b.RoleRef, b.Subjects)
	}
}

func (s clusterRoleBindingStrategy) PrepareForUpdate(ctx context.Context, obj, _ runtime.Object) {
	s.PrepareForCreate(ctx, obj)
}

func (clusterRoleBindingStrategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return wrongType(obj, "*rbacv1.ClusterRoleBinding")
	}
	return validateBinding(b.RoleRef, b.Subjects, false)
}

func (s clusterRoleBindingStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	errs := s.Validate(ctx, obj)
	b, ok := obj.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return errs
	}
	o, ok := old.(*rbacv1.ClusterRoleBinding)
	if !ok {
		return append(errs, wrongType(old, "*rbacv1.ClusterRoleBinding")...)
	}
	return append(errs, validateRoleRefUpdate(b.RoleRef, o.RoleRef)...)
}
