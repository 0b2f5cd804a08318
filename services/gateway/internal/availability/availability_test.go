package availability_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	apiregistrationv1client "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/services/gateway/internal/availability"
	"kplane.dev/services/gateway/internal/discovery/backendtest"
)

// resolver finds services in a fixed map, as make up's static resolver
// does; local APIServices are served by core.
type resolver struct {
	core     *url.URL
	services map[string]*url.URL
}

func (r resolver) Resolve(_ context.Context, s *apiregistrationv1.APIService) (availability.Endpoint, error) {
	if s.Spec.Service == nil {
		return availability.Endpoint{URL: r.core, Client: http.DefaultClient}, nil
	}
	u, ok := r.services[s.Spec.Service.Namespace+"/"+s.Spec.Service.Name]
	if !ok {
		return availability.Endpoint{}, fmt.Errorf("resolve %s/%s: %w", s.Spec.Service.Namespace, s.Spec.Service.Name, availability.ErrServiceNotFound)
	}
	if u == nil {
		return availability.Endpoint{}, fmt.Errorf("resolve %s/%s: %w", s.Spec.Service.Namespace, s.Spec.Service.Name, availability.ErrMissingEndpoints)
	}
	return availability.Endpoint{URL: u, Client: http.DefaultClient}, nil
}

// apiServicesResource declares apiservices with kube-aggregator's types
// and /status, as core does.
func apiServicesResource(t *testing.T) *resource.Resource {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiregistrationv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	gvk := apiregistrationv1.SchemeGroupVersion.WithKind("APIService")
	objs, err := objects.NewTyped(scheme, gvk, "APIServiceList")
	if err != nil {
		t.Fatal(err)
	}
	schema, err := builtin.Schema(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: apiregistrationv1.SchemeGroupVersion.WithResource("apiservices"),
		Kind:                 "APIService",
		Singular:             "apiservice",
		Subresources:         resource.Subresources{Status: true},
		Objects:              objs,
		Schema:               schema,
		Strategy:             apiServiceStrategy{},
	}
}

// apiServiceStrategy allows the legacy group's name, "v1.", which is no
// DNS subdomain; core's strategy validates the rest.
type apiServiceStrategy struct{}

func (apiServiceStrategy) PrepareForCreate(context.Context, runtime.Object)                 {}
func (apiServiceStrategy) PrepareForUpdate(context.Context, runtime.Object, runtime.Object) {}
func (apiServiceStrategy) Validate(context.Context, runtime.Object) field.ErrorList         { return nil }
func (apiServiceStrategy) ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList {
	return nil
}
func (apiServiceStrategy) ValidateName(string, bool) []string { return nil }

type fixture struct {
	core, widgets *backendtest.Backend
	apiServices   apiregistrationv1client.APIServiceInterface
	controller    *availability.Controller
}

func start(t *testing.T) *fixture {
	t.Helper()
	etcd := etcdtest.Start(t).Client(t)
	core := backendtest.Start(t, etcd, "/core", append(backendtest.Resources(t, apitest.ConfigMaps), apiServicesResource(t)))
	widgets := backendtest.Start(t, etcd, "/widgets", backendtest.Resources(t, apitest.Widgets))
	clients, err := aggregator.NewForConfig(core.Config)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{core: core, widgets: widgets, apiServices: clients.ApiregistrationV1().APIServices()}
	port := int32(443)
	for _, s := range []*apiregistrationv1.APIService{
		{ObjectMeta: metav1.ObjectMeta{Name: "v1."}, Spec: apiregistrationv1.APIServiceSpec{Version: "v1", GroupPriorityMinimum: 18000, VersionPriority: 1}},
		{ObjectMeta: metav1.ObjectMeta{Name: "v1.example.com"}, Spec: apiregistrationv1.APIServiceSpec{
			Group: "example.com", Version: "v1", GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service: &apiregistrationv1.ServiceReference{Namespace: "widgets", Name: "api", Port: &port},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "v1.missing.example.com"}, Spec: apiregistrationv1.APIServiceSpec{
			Group: "missing.example.com", Version: "v1", GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service: &apiregistrationv1.ServiceReference{Namespace: "widgets", Name: "missing", Port: &port},
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "v1.empty.example.com"}, Spec: apiregistrationv1.APIServiceSpec{
			Group: "empty.example.com", Version: "v1", GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service: &apiregistrationv1.ServiceReference{Namespace: "widgets", Name: "empty", Port: &port},
		}},
		// Served by core, which does not serve the group.
		{ObjectMeta: metav1.ObjectMeta{Name: "v1.absent.example.com"}, Spec: apiregistrationv1.APIServiceSpec{Group: "absent.example.com", Version: "v1", GroupPriorityMinimum: 1000, VersionPriority: 15}},
	} {
		if _, err := f.apiServices.Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create apiservice %s: %v", s.Name, err)
		}
	}
	r := resolver{core: core.URL, services: map[string]*url.URL{"widgets/api": widgets.URL, "widgets/empty": nil}}
	if f.controller, err = availability.New(f.apiServices, r, availability.WithInterval(time.Hour), availability.WithTimeout(5*time.Second), availability.WithLogger(backendtest.Logger(t))); err != nil {
		t.Fatal(err)
	}
	return f
}

// want is an expected Available condition; a message ending in "*" is a
// prefix.
type want struct {
	status  apiregistrationv1.ConditionStatus
	reason  string
	message string
}

func (w want) matches(c *apiregistrationv1.APIServiceCondition) bool {
	if c == nil || c.Status != w.status || c.Reason != w.reason {
		return false
	}
	if prefix, ok := strings.CutSuffix(w.message, "*"); ok {
		return strings.HasPrefix(c.Message, prefix)
	}
	return c.Message == w.message
}

func available(s *apiregistrationv1.APIService) *apiregistrationv1.APIServiceCondition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == apiregistrationv1.Available {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

func (f *fixture) get(t *testing.T, name string) *apiregistrationv1.APIService {
	t.Helper()
	s, err := f.apiServices.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get apiservice %s: %v", name, err)
	}
	return s
}

// waitFor polls until the APIService's condition matches w.
func (f *fixture) waitFor(t *testing.T, name string, w want) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c := available(f.get(t, name))
		if w.matches(c) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("apiservice %s: condition %+v, want %+v", name, c, w)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestConditions(t *testing.T) {
	f := start(t)
	if err := f.controller.Sync(context.Background()); err != nil {
		t.Fatalf("sync: %v", err)
	}
	passed := want{apiregistrationv1.ConditionTrue, "Passed", "all checks passed"}
	// kube probes only the APIServices of aggregated servers: a local
	// one is available even before what it names is served, as a CRD's
	// group-version is registered before its resources are.
	local := want{apiregistrationv1.ConditionTrue, "Local", "Local APIServices are always available"}
	tests := []struct {
		apiService string
		want       want
	}{
		{"v1.", local},
		{"v1.example.com", passed},
		{"v1.missing.example.com", want{apiregistrationv1.ConditionFalse, "ServiceNotFound", `service/missing in "widgets" is not present`}},
		{"v1.empty.example.com", want{apiregistrationv1.ConditionFalse, "MissingEndpoints", `endpointslices for service/empty in "widgets" have no addresses with port name ""`}},
		{"v1.absent.example.com", local},
	}
	for _, tc := range tests {
		t.Run(tc.apiService, func(t *testing.T) {
			if c := available(f.get(t, tc.apiService)); !tc.want.matches(c) {
				t.Errorf("condition %+v, want %+v", c, tc.want)
			}
		})
	}

	t.Run("writes only changes", func(t *testing.T) {
		before := f.get(t, "v1.example.com").ResourceVersion
		if err := f.controller.Sync(context.Background()); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if after := f.get(t, "v1.example.com").ResourceVersion; after != before {
			t.Errorf("resourceVersion went from %s to %s with no change", before, after)
		}
	})
}

func TestFlipsWithTheBackend(t *testing.T) {
	f := start(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.controller.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
	passed := want{apiregistrationv1.ConditionTrue, "Passed", "all checks passed"}
	f.waitFor(t, "v1.example.com", passed)
	first := available(f.get(t, "v1.example.com")).LastTransitionTime

	f.widgets.Stop(t)
	f.controller.Trigger()
	f.waitFor(t, "v1.example.com", want{apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck",
		"failing or missing response from " + f.widgets.URL.String() + "/apis/example.com/v1: Get \"" + f.widgets.URL.String() + "/apis/example.com/v1\": dial tcp *"})
	f.waitFor(t, "v1.", want{apiregistrationv1.ConditionTrue, "Local", "Local APIServices are always available"})

	f.widgets.Start(t)
	f.controller.Trigger()
	f.waitFor(t, "v1.example.com", passed)
	if last := available(f.get(t, "v1.example.com")).LastTransitionTime; last.Before(&first) {
		t.Errorf("lastTransitionTime went back from %s to %s", first, last)
	}
}
