package crds

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// GVR is the resource this package declares.
var GVR = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// Kind is the kind of GVR.
var Kind = apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition")

// CleanupFinalizer holds a CRD until its custom resources are gone.
const CleanupFinalizer = apiextensionsv1.CustomResourceCleanupFinalizer

// NewScheme returns a scheme of apiextensions.k8s.io: v1 with its
// defaults and conversions, and the internal version kube validates.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := apiextensions.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register apiextensions: %w", err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("register apiextensions/v1: %w", err)
	}
	return s, nil
}

// Resource declares customresourcedefinitions.
func Resource() (*resource.Resource, error) {
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	objs, err := objects.NewTyped(scheme, Kind, "CustomResourceDefinitionList")
	if err != nil {
		return nil, err
	}
	sch, err := builtin.Schema(Kind)
	if err != nil {
		return nil, err
	}
	return &resource.Resource{
		GroupVersionResource: GVR,
		Kind:                 Kind.Kind,
		Singular:             "customresourcedefinition",
		ShortNames:           []string{"crd", "crds"},
		Categories:           []string{"api-extensions"},
		Subresources:         resource.Subresources{Status: true},
		Generation:           true,
		Columns: []resource.Column{{
			TableColumnDefinition: metav1.TableColumnDefinition{Name: "Created At", Type: "date", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]},
			Cell:                  resource.CellFunc(createdAt),
		}},
		Objects:  objs,
		Schema:   sch,
		Strategy: &Strategy{scheme: scheme},
	}, nil
}

// createdAt is the CREATED AT column of kube's default table: the
// creation time, as RFC 3339.
func createdAt(obj runtime.Object) (any, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("read metadata of %T: %w", obj, err)
	}
	return m.GetCreationTimestamp().UTC().Format(time.RFC3339), nil
}

// Strategy is kube's CRD strategy.
type Strategy struct {
	scheme *runtime.Scheme
}

var (
	_ resource.Strategy    = (*Strategy)(nil)
	_ rest.DeferredDeleter = (*Strategy)(nil)
)

// PrepareForCreate defaults crd and records its storage version as
// stored.
func (s *Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	s.scheme.Default(crd)
	crd.Status = apiextensionsv1.CustomResourceDefinitionStatus{}
	addStoredVersion(crd)
}

// PrepareForUpdate defaults crd and adds its storage version to the
// stored ones, which only ever grow here (a user removes one through
// /status once no object is stored in it).
func (s *Strategy) PrepareForUpdate(_ context.Context, obj, _ runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	s.scheme.Default(crd)
	addStoredVersion(crd)
}

func addStoredVersion(crd *apiextensionsv1.CustomResourceDefinition) {
	v, err := apihelpers.GetCRDStorageVersion(crd)
	if err == nil && !apihelpers.IsStoredVersion(crd, v) {
		crd.Status.StoredVersions = append(crd.Status.StoredVersions, v)
	}
}

// Validate checks a new CRD with kube's rules.
func (s *Strategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	in, err := s.internal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceDefinition(ctx, in)
}

// ValidateUpdate checks a change of a CRD with kube's rules, those of
// its status included.
func (s *Strategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	in, err := s.internal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	oldIn, err := s.internal(old)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return validation.ValidateCustomResourceDefinitionUpdate(ctx, in, oldIn)
}

// internal converts a v1 CRD to the internal version kube's validation
// is written for.
func (s *Strategy) internal(obj runtime.Object) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := s.scheme.Convert(obj, out, nil); err != nil {
		return nil, fmt.Errorf("convert CustomResourceDefinition to the internal version: %w", err)
	}
	return out, nil
}

// PrepareForDelete holds the CRD with the cleanup finalizer and marks it
// Terminating, as kube's CRD registry does on the first delete.
func (s *Strategy) PrepareForDelete(obj runtime.Object) {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !apihelpers.CRDHasFinalizer(crd, CleanupFinalizer) {
		crd.Finalizers = append(crd.Finalizers, CleanupFinalizer)
	}
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
}

// Finalizing reports that a CRD whose deletion has not started waits on
// its cleanup, which the first delete adds.
func (s *Strategy) Finalizing(obj runtime.Object) bool {
	crd := obj.(*apiextensionsv1.CustomResourceDefinition)
	return crd.DeletionTimestamp == nil || apihelpers.CRDHasFinalizer(crd, CleanupFinalizer)
}
