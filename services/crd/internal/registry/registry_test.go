package registry_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/webhook"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/services/crd/internal/registry"
)

// server records what it was told to serve.
type server struct{ served []*resource.Resource }

func (s *server) Replace(r []*resource.Resource) error {
	s.served = r
	return nil
}

func (s *server) find(gvr schema.GroupVersionResource) *resource.Resource {
	for _, r := range s.served {
		if r.GroupVersionResource == gvr {
			return r
		}
	}
	return nil
}

var widgetsV1 = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

func widgets(conditions ...apiextensionsv1.CustomResourceDefinitionConditionType) *apiextensionsv1.CustomResourceDefinition {
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: "u1", Generation: 1},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped, Names: names,
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
				{Name: "v0", Served: false, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
			},
		},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{AcceptedNames: names},
	}
	for _, c := range conditions {
		crd.Status.Conditions = append(crd.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: c, Status: apiextensionsv1.ConditionTrue})
	}
	return crd
}

func newRegistry(t *testing.T) *registry.Registry {
	t.Helper()
	converters, err := conversion.NewCRConverterFactory(webhook.NewDefaultServiceResolver(), func(r webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver { return r })
	if err != nil {
		t.Fatal(err)
	}
	static := &resource.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}}
	return registry.New([]*resource.Resource{static}, converters, slog.New(slog.DiscardHandler))
}

func TestServedVersions(t *testing.T) {
	tests := []struct {
		name   string
		crd    *apiextensionsv1.CustomResourceDefinition
		serve  bool
		listed bool
	}{
		{name: "names not yet accepted", crd: widgets()},
		{name: "names accepted", crd: widgets(apiextensionsv1.NamesAccepted), serve: true},
		{name: "established", crd: widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established), serve: true, listed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &server{}
			if err := newRegistry(t).Sync(s, []*apiextensionsv1.CustomResourceDefinition{tt.crd}); err != nil {
				t.Fatal(err)
			}
			r := s.find(widgetsV1)
			if got := r != nil; got != tt.serve {
				t.Errorf("widgets served = %v, want %v (served %d resources)", got, tt.serve, len(s.served))
			}
			if r != nil && r.Unlisted == tt.listed {
				t.Errorf("widgets unlisted = %v, want %v", r.Unlisted, !tt.listed)
			}
			if s.find(schema.GroupVersionResource{Group: "example.com", Version: "v0", Resource: "widgets"}) != nil {
				t.Error("a version that is not served is declared")
			}
			if s.find(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}) == nil {
				t.Error("the static resources are not served")
			}
		})
	}
}

func TestRebuildsOnlyOnChange(t *testing.T) {
	reg, s := newRegistry(t), &server{}
	crd := widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established)
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	first := s.find(widgetsV1)
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{crd.DeepCopy()}); err != nil {
		t.Fatal(err)
	}
	if s.find(widgetsV1) != first {
		t.Error("an unchanged CRD's declaration was rebuilt")
	}
	changed := crd.DeepCopy()
	changed.Generation = 2
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{changed}); err != nil {
		t.Fatal(err)
	}
	second := s.find(widgetsV1)
	if second == first || second.StoreGeneration == first.StoreGeneration {
		t.Error("a changed CRD keeps its declaration and store version: its objects would be read by the old schema")
	}
	if err := reg.Sync(s, nil); err != nil {
		t.Fatal(err)
	}
	if s.find(widgetsV1) != nil {
		t.Error("a deleted CRD's resources are still served")
	}
}

// Establishing a CRD lists its resources and keeps their store, which
// holds the watch cache of its objects.
func TestEstablishingLists(t *testing.T) {
	reg, s := newRegistry(t), &server{}
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{widgets(apiextensionsv1.NamesAccepted)}); err != nil {
		t.Fatal(err)
	}
	accepted := s.find(widgetsV1)
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established)}); err != nil {
		t.Fatal(err)
	}
	established := s.find(widgetsV1)
	if !accepted.Unlisted || established.Unlisted {
		t.Fatalf("unlisted before and after Established: %v, %v; want true, false", accepted.Unlisted, established.Unlisted)
	}
	if established.StoreGeneration != accepted.StoreGeneration {
		t.Error("establishing a CRD changed its store generation: its watch cache would be read anew")
	}
}

func TestTerminatingRefusesCreates(t *testing.T) {
	reg, s := newRegistry(t), &server{}
	admission := reg.Terminating()
	create := &rest.Attributes{Operation: rest.Create, Resource: widgetsV1}
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established)}); err != nil {
		t.Fatal(err)
	}
	if err := admission.Validate(context.Background(), create); err != nil {
		t.Fatalf("create refused before the CRD terminates: %v", err)
	}
	if err := reg.Sync(s, []*apiextensionsv1.CustomResourceDefinition{widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established, apiextensionsv1.Terminating)}); err != nil {
		t.Fatal(err)
	}
	err := admission.Validate(context.Background(), create)
	if !apierrors.IsMethodNotSupported(err) || apierrors.ReasonForError(err) != metav1.StatusReasonMethodNotAllowed {
		t.Fatalf("create while terminating: %v, want 405 MethodNotAllowed", err)
	}
	if code := err.(apierrors.APIStatus).Status().Code; code != http.StatusMethodNotAllowed {
		t.Errorf("code %d", code)
	}
	if msg := err.Error(); msg != "create not allowed while custom resource definition is terminating" {
		t.Errorf("message %q", msg)
	}
	if !admission.Handles(rest.Create) || admission.Handles(rest.Update) {
		t.Error("the terminating admission looks at other operations than create")
	}
}

// TestMissingCatchesUp shows a replica asked for a custom resource it does
// not serve yet, because its watch of the CRDs lags storage, serves it
// once the watch catches up rather than answering 404; and a resource no
// CRD defines stays missing.
func TestMissingCatchesUp(t *testing.T) {
	reg, s := newRegistry(t), &server{}
	client := fake.NewSimpleClientset()
	factory := apiextensionsinformers.NewSharedInformerFactory(client, 0)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions()
	informer.Informer()
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	stored := widgets(apiextensionsv1.NamesAccepted, apiextensionsv1.Established)
	stored.ResourceVersion = "7"
	get := func(_ context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
		if name != stored.Name {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, name)
		}
		return stored, nil
	}
	synced := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- reg.Run(ctx, s, informer, get, func() { close(synced) }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		factory.Shutdown()
	})
	<-synced
	if reg.Missing(ctx, schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "gadgets"}) {
		t.Error("a resource no CRD defines was reported found")
	}
	// The watch delivers the CRD while the request waits.
	go func() {
		time.Sleep(50 * time.Millisecond)
		if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), stored, metav1.CreateOptions{}); err != nil {
			t.Errorf("create CRD: %v", err)
		}
	}()
	if !reg.Missing(ctx, widgetsV1) {
		t.Fatal("a resource of a CRD established in storage was not found once the watch caught up")
	}
	if s.find(widgetsV1) == nil {
		t.Error("Missing reported the resource found but the server does not serve it")
	}
}
