package controller_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/apiserver/nslifecycle"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/storage"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/namespace"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// startServer serves namespaces (with their strategy and /status and
// /finalize), configmaps, serviceaccounts and widgets.example.com (an
// unstructured kind, as another service's custom resources) from libs'
// apitest server, with NamespaceLifecycle admission, and returns clients
// of it.
func startServer(t *testing.T) *apiclient.Clients {
	t.Helper()
	v1 := corev1.SchemeGroupVersion
	ns := apitest.Typed(t, v1.WithResource("namespaces"), "Namespace", false)
	ns.ShortNames = []string{"ns"}
	ns.Subresources = resource.Subresources{Status: true, Finalize: true}
	ns.Strategy = namespace.Strategy()
	srv := apitest.Start(t, apitest.Options{
		Resources: []*resource.Resource{
			ns,
			apitest.Typed(t, v1.WithResource("configmaps"), "ConfigMap", true),
			apitest.Typed(t, v1.WithResource("serviceaccounts"), "ServiceAccount", true),
			{
				GroupVersionResource: widgets,
				Kind:                 "Widget",
				Namespaced:           true,
				Objects:              objects.NewUnstructured(widgets.GroupVersion().WithKind("Widget"), "WidgetList"),
			},
		},
		// Lifecycle reads namespaces through the store (and watch cache)
		// that serves them.
		Configure: func(o *server.Options) error {
			stores := o.Stores
			nsStore, nsKeys, err := stores(ns)
			if err != nil {
				return err
			}
			o.Stores = func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
				if r == ns {
					return nsStore, nsKeys, nil
				}
				return stores(r)
			}
			o.HandlerOptions = append(o.HandlerOptions, rest.WithAdmission(nslifecycle.New(nsStore, nsKeys, nslifecycle.Immortal...)))
			return nil
		},
	})
	clients, err := apiclient.New(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	return clients
}

// eventually polls cond until it holds or a deadline passes; cond says
// what it saw, for the failure.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", what, saw)
		}
		<-tick.C
	}
}

// newNamespace creates an empty namespace.
func newNamespace(t *testing.T, c *apiclient.Clients, name string) {
	t.Helper()
	if _, err := c.Kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
