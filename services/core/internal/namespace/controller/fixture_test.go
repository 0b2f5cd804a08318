package controller_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/namespace"
)

var widgets = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// typed declares a core/v1 kind served with its typed codec.
func typed(t *testing.T, scheme *runtime.Scheme, kind, plural string, namespaced bool) *resource.Resource {
	t.Helper()
	gvk := corev1.SchemeGroupVersion.WithKind(kind)
	o, err := objects.NewTyped(scheme, gvk, kind+"List")
	if err != nil {
		t.Fatal(err)
	}
	s, err := builtin.Schema(gvk)
	if err != nil {
		t.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: corev1.SchemeGroupVersion.WithResource(plural),
		Kind:                 kind,
		Namespaced:           namespaced,
		Schema:               s,
		Objects:              o,
	}
}

// startServer serves namespaces (with their strategy and /status and
// /finalize), configmaps, serviceaccounts and widgets.example.com (an
// unstructured kind, as another service's custom resources) from an
// embedded etcd, with NamespaceLifecycle admission, and returns clients
// of it.
func startServer(t *testing.T) *apiclient.Clients {
	t.Helper()
	client := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond)).Client(t)
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := typed(t, scheme, "Namespace", "namespaces", false)
	ns.ShortNames = []string{"ns"}
	ns.Subresources = resource.Subresources{Status: true, Finalize: true}
	ns.Strategy = namespace.Strategy()
	resources := []*resource.Resource{
		ns,
		typed(t, scheme, "ConfigMap", "configmaps", true),
		typed(t, scheme, "ServiceAccount", "serviceaccounts", true),
		{
			GroupVersionResource: widgets,
			Kind:                 "Widget",
			Namespaced:           true,
			Objects:              objects.NewUnstructured(widgets.GroupVersion().WithKind("Widget"), "WidgetList"),
		},
	}
	stores := server.CachedEtcdStores(client, "/kplane", nil)
	// Lifecycle reads namespaces through the store (and watch cache)
	// that serves them.
	nsStore, nsKeys, err := stores(ns)
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{
		Resources: resources,
		Stores: func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
			if r == ns {
				return nsStore, nsKeys, nil
			}
			return stores(r)
		},
		HandlerOptions: []rest.Option{rest.WithAdmission(namespace.NewLifecycle(nsStore, nsKeys, namespace.Immortal...))},
		Logger:         slog.New(slog.DiscardHandler),
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run server: %v", err)
		}
		hs.Close()
	})
	clients, err := apiclient.New(&restclient.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return clients
}

// runController runs c until the test ends.
func runController(t *testing.T, c interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run controller: %v", err)
		}
	})
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
