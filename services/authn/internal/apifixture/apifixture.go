package apifixture

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/etcdtest"
)

// Server is a running API server.
type Server struct {
	// Config reaches it with client-go.
	Config *restclient.Config
	// Client is a clientset of Config.
	Client kubernetes.Interface
	// Kubeconfig is a kubeconfig file naming it.
	Kubeconfig string
}

// Start serves the kinds until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	etcd := etcdtest.Start(t, etcdtest.WithProgressNotifyInterval(100*time.Millisecond))
	res, err := resources()
	if err != nil {
		t.Fatalf("declare resources: %v", err)
	}
	opts := server.Options{
		Resources: res,
		Stores:    server.CachedEtcdStores(etcd.Client(t), "/kplane", nil),
		Logger:    slog.New(slog.DiscardHandler),
	}
	cfg, err := opts.Config()
	if err != nil {
		t.Fatalf("server config: %v", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("build server: %v", err)
	}
	hs := httptest.NewServer(srv.Handler())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run api server: %v", err)
		}
		hs.Close()
	})
	s := &Server{Config: &restclient.Config{Host: hs.URL, QPS: -1}}
	if s.Client, err = kubernetes.NewForConfig(s.Config); err != nil {
		t.Fatalf("clientset: %v", err)
	}
	s.Kubeconfig = filepath.Join(t.TempDir(), "api.kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: api
  cluster: {server: %q}
users:
- name: authn
  user: {}
contexts:
- name: api
  context: {cluster: api, user: authn}
current-context: api
`, hs.URL)
	if err := os.WriteFile(s.Kubeconfig, []byte(kc), 0o600); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return s
}

func resources() ([]*resource.Resource, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register core/v1: %w", err)
	}
	kinds := []struct {
		resource, kind string
		namespaced     bool
	}{
		{"serviceaccounts", "ServiceAccount", true},
		{"secrets", "Secret", true},
		{"pods", "Pod", true},
		{"nodes", "Node", false},
	}
	var out []*resource.Resource
	for _, k := range kinds {
		objs, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind(k.kind), k.kind+"List")
		if err != nil {
			return nil, err
		}
		out = append(out, &resource.Resource{
			GroupVersionResource: corev1.SchemeGroupVersion.WithResource(k.resource),
			Kind:                 k.kind,
			Singular:             k.resource[:len(k.resource)-1],
			Namespaced:           k.namespaced,
			Objects:              objs,
		})
	}
	return out, nil
}
