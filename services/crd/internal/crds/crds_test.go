package crds_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/services/crd/internal/crds"
)

func widgets() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com",
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
}

func TestValidate(t *testing.T) {
	r, err := crds.Resource()
	if err != nil {
		t.Fatal(err)
	}
	s := r.Strategy
	tests := []struct {
		name   string
		modify func(*apiextensionsv1.CustomResourceDefinition)
		// want are kube's messages, each of one error.
		want []string
	}{
		{name: "valid", modify: func(*apiextensionsv1.CustomResourceDefinition) {}},
		{name: "name not plural.group", modify: func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "gadgets.example.com" },
			want: []string{`metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group`}},
		{name: "two storage versions", modify: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions = append(c.Spec.Versions, c.Spec.Versions[0])
			c.Spec.Versions[1].Name = "v2"
		}, want: []string{`spec.versions: Invalid value: [{"Name":"v1"`, "must have exactly one version marked as storage version"}},
		{name: "a CEL rule that does not compile", modify: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.XValidations = apiextensionsv1.ValidationRules{{Rule: "self.nope +"}}
		}, want: []string{`spec.validation.openAPIV3Schema.x-kubernetes-validations[0].rule: Invalid value: {"Rule":"self.nope +"`, "compilation failed: ERROR: <input>:1:12: Syntax error"}},
		{name: "no schema", modify: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil },
			want: []string{"spec.versions[0].schema.openAPIV3Schema: Required value"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := widgets()
			tt.modify(crd)
			s.PrepareForCreate(context.Background(), crd)
			errs := s.Validate(context.Background(), crd)
			if len(tt.want) == 0 {
				if len(errs) != 0 {
					t.Fatalf("errors: %v", errs.ToAggregate())
				}
				return
			}
			got := errs.ToAggregate().Error()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("errors %q lack %q", got, w)
				}
			}
		})
	}
}

func TestStoredVersions(t *testing.T) {
	r, err := crds.Resource()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	crd := widgets()
	crd.ResourceVersion = "1"
	crd.Status.StoredVersions = []string{"v0"}
	r.Strategy.PrepareForCreate(ctx, crd)
	if got := crd.Status.StoredVersions; len(got) != 1 || got[0] != "v1" {
		t.Fatalf("stored versions after create = %q, want only the storage version v1", got)
	}
	old := crd.DeepCopy()
	crd.Spec.Versions = append(crd.Spec.Versions, crd.Spec.Versions[0])
	crd.Spec.Versions[0].Storage, crd.Spec.Versions[1].Name = false, "v2"
	r.Strategy.PrepareForUpdate(ctx, crd, old)
	if got := crd.Status.StoredVersions; len(got) != 2 || got[0] != "v1" || got[1] != "v2" {
		t.Fatalf("stored versions after moving storage to v2 = %q, want v1 and v2", got)
	}
	if errs := r.Strategy.ValidateUpdate(ctx, crd, old); len(errs) != 0 {
		t.Fatalf("update: %v", errs.ToAggregate())
	}
}

func TestDeletionAddsCleanup(t *testing.T) {
	r, err := crds.Resource()
	if err != nil {
		t.Fatal(err)
	}
	dd, ok := r.Strategy.(rest.DeferredDeleter)
	if !ok {
		t.Fatal("the CRD strategy does not defer deletion")
	}
	crd := widgets()
	if !dd.Finalizing(crd) {
		t.Error("a CRD whose deletion has not started does not wait for its cleanup")
	}
	dd.PrepareForDelete(crd)
	if !apihelpers.CRDHasFinalizer(crd, crds.CleanupFinalizer) {
		t.Errorf("finalizers = %q, want %s", crd.Finalizers, crds.CleanupFinalizer)
	}
	if c := apihelpers.FindCRDCondition(crd, apiextensionsv1.Terminating); c == nil || c.Status != apiextensionsv1.ConditionTrue || c.Reason != "InstanceDeletionPending" {
		t.Errorf("Terminating condition = %+v", c)
	}
	now := metav1.Now()
	crd.DeletionTimestamp = &now
	crd.Finalizers = nil
	if dd.Finalizing(crd) {
		t.Error("a CRD being deleted without the cleanup finalizer still waits")
	}
}
