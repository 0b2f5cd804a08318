package rest

import (
	"context"
	"fmt"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/resource"
)

// Operation is the kind of write admission is asked about, named as in
// AdmissionReview.
type Operation string

// The operations admission sees.
const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
	Delete Operation = "DELETE"
)

// Attributes describe one write to admission.
type Attributes struct {
	Operation Operation
	// Resource and Subresource name what the request addressed.
	Resource    schema.GroupVersionResource
	Subresource string
	Kind        schema.GroupVersionKind
	Namespace   string
	Name        string
	// Object is the state the write stores: nil for a delete. A mutating
	// admission may change it in place or set another object of the same
	// kind.
	Object runtime.Object
	// OldObject is the stored state an update or delete starts from; nil
	// for a create.
	OldObject runtime.Object
	// Options are the write's CreateOptions, UpdateOptions or
	// DeleteOptions, as AdmissionReview carries them.
	Options runtime.Object
	DryRun  bool
	// User is who asked, as the front proxy authenticated the request;
	// nil when it was not.
	User *authenticationv1.UserInfo
	// Equivalents and Definition are the resource's, for admission's
	// matchPolicy Equivalent; the equivalents' kinds are Kind's when a
	// subresource takes a kind of its own (scale).
	Equivalents []resource.Equivalent
	Definition  *apiextensionsv1.CustomResourceDefinition
}

// setKind sets the kind a subresource takes, for a and its equivalents.
func (a *Attributes) setKind(kind schema.GroupVersionKind) {
	a.Kind = kind
	for i := range a.Equivalents {
		a.Equivalents[i].Kind = kind
	}
}

// Admission is one admission plugin, kube's admission.Interface: it
// implements MutatingAdmission, ValidatingAdmission or both, and says
// which operations it looks at.
type Admission interface {
	Handles(op Operation) bool
}

// MutatingAdmission may change a create's or update's object after it is
// decoded and before the resource's strategy defaults and validates it.
// For a delete it sees the stored object (OldObject) before it goes.
type MutatingAdmission interface {
	Admission
	Admit(ctx context.Context, a *Attributes) error
}

// ValidatingAdmission may refuse a write after the resource's own
// validation, right before it is stored; it must not change the object.
type ValidatingAdmission interface {
	Admission
	Validate(ctx context.Context, a *Attributes) error
}

// WithAdmission adds admission plugins, run in order: every mutating one
// before validation, then every validating one before storage. Their
// errors reach the client as they are.
func WithAdmission(plugins ...Admission) Option {
	return func(h *Handler) { h.admission = append(h.admission, plugins...) }
}

// checkAdmission refuses a plugin that can neither mutate nor validate:
// it would silently do nothing.
func checkAdmission(plugins []Admission) error {
	for i, p := range plugins {
		_, m := p.(MutatingAdmission)
		_, v := p.(ValidatingAdmission)
		if !m && !v {
			return fmt.Errorf("admission plugin %d (%T) is neither mutating nor validating", i, p)
		}
	}
	return nil
}

// attributes returns the Attributes of a write of this resource.
func (h *Handler) attributes(ctx context.Context, op Operation, namespace, name, subresource string, obj, old, opts runtime.Object, dryRun bool) *Attributes {
	a := &Attributes{
		Operation:   op,
		Resource:    h.r.GroupVersionResource,
		Subresource: subresource,
		Kind:        h.r.GroupVersionKind(),
		Namespace:   namespace,
		Name:        name,
		Object:      obj,
		OldObject:   old,
		Options:     opts,
		DryRun:      dryRun,
		Equivalents: slices.Clone(h.r.Equivalents),
		Definition:  h.r.Definition,
	}
	a.User = userInfo(ctx)
	return a
}

// admit runs the mutating plugins that handle a's operation and returns
// the object they leave.
func (h *Handler) admit(ctx context.Context, a *Attributes) (runtime.Object, error) {
	for _, p := range h.admission {
		m, ok := p.(MutatingAdmission)
		if !ok || !m.Handles(a.Operation) {
			continue
		}
		if err := m.Admit(ctx, a); err != nil {
			return nil, err
		}
		if a.Operation != Delete && a.Object == nil {
			return nil, apierrors.NewInternalError(fmt.Errorf("admission plugin %T dropped the object", p))
		}
	}
	return a.Object, nil
}

// validate runs the validating plugins that handle a's operation.
func (h *Handler) validate(ctx context.Context, a *Attributes) error {
	for _, p := range h.admission {
		v, ok := p.(ValidatingAdmission)
		if !ok || !v.Handles(a.Operation) {
			continue
		}
		if err := v.Validate(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
