package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
)

// The bodies kube-apiserver's router answers for a path it has no route
// for, and for a method a route does not take.
const (
	noRoute  = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
	noMethod = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server does not allow this method on the requested resource","reason":"MethodNotAllowed","details":{},"code":405}`
)

// TestPathShapes sends the path shapes kube's router has no route for.
// Request info fills its fields from any of them, and the gateway
// authorizes those fields: /api/v1/namespaces/mine/namespaces is "list
// namespaces in namespace mine", which a RoleBinding in mine can allow.
// Serving it as a list of every namespace, or .../namespaces/other as
// namespace other, would hand out what was never authorized.
func TestPathShapes(t *testing.T) {
	f := newFixtureOf(t, direct, append(resources(t), namespacesResource(t)))
	f.seedConfigMap("mine", "a", nil, map[string]string{"k": "v"})
	f.seedNamespace("mine")
	f.seedNamespace("other")
	ns := `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other","labels":{"taken":"yes"}}}`
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"mine"},"data":{"k":"changed"}}`
	merge := `{"metadata":{"labels":{"taken":"yes"}}}`

	for _, tc := range []struct {
		method, path, body string
		want               string
	}{
		// A cluster-scoped resource under a namespace.
		{"GET", "/api/v1/namespaces/mine/namespaces", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/namespaces?watch=true", "", noRoute},
		{"GET", "/api/v1/watch/namespaces/mine/namespaces", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/namespaces/other", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/namespaces/mine", "", noRoute},
		{"GET", "/api/v1/watch/namespaces/mine/namespaces/other", "", noRoute},
		{"PUT", "/api/v1/namespaces/mine/namespaces/other", ns, noRoute},
		{"PATCH", "/api/v1/namespaces/mine/namespaces/other", merge, noRoute},
		{"DELETE", "/api/v1/namespaces/mine/namespaces/other", "", noRoute},
		{"DELETE", "/api/v1/namespaces/mine/namespaces", "", noRoute},
		{"POST", "/api/v1/namespaces/mine/namespaces", ns, noRoute},
		{"GET", "/api/v1/namespaces/mine/namespaces/other/status", "", noRoute},
		{"PUT", "/api/v1/namespaces/mine/namespaces/other/status", ns, noRoute},
		// A namespaced object or subresource without its namespace.
		{"GET", "/api/v1/configmaps/a", "", noRoute},
		{"PUT", "/api/v1/configmaps/a", cm, noRoute},
		{"DELETE", "/api/v1/configmaps/a", "", noRoute},
		{"GET", "/api/v1/watch/configmaps/a", "", noRoute},
		{"GET", "/apis/example.com/v1/widgets/w/status", "", noRoute},
		// Writes to the collection of every namespace, served only to read.
		{"POST", "/api/v1/configmaps", cm, noMethod},
		{"DELETE", "/api/v1/configmaps", "", noMethod},
		// Empty and extra segments, unknown subresources.
		{"GET", "/api/v1/namespaces//configmaps/a", "", noRoute},
		{"GET", "/api/v1/namespaces//configmaps", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/configmaps//status", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/configmaps/a/status/extra", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/configmaps/a/nope", "", noRoute},
		{"GET", "/api/v1/namespaces/mine/configmaps/a/status", "", noRoute},
		{"GET", "/api/v1/watch/namespaces/mine/widgets/w/status", "", noRoute},
		{"GET", "/api/v1/namespaces/other/status/extra", "", noRoute},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			code, body := do(t, tc.method, f.url+tc.path, tc.body)
			if got := strings.TrimSpace(body); got != tc.want {
				t.Errorf("%d %s\nwant %s", code, got, tc.want)
			}
		})
	}

	// Nothing above changed anything.
	for _, name := range []string{"mine", "other"} {
		got, err := f.typed().CoreV1().Namespaces().Get(f.ctx, name, metav1.GetOptions{})
		if err != nil || len(got.Labels) > 0 {
			t.Errorf("namespace %s after the requests: %+v, %v", name, got, err)
		}
	}
	if got, err := f.typed().CoreV1().ConfigMaps("mine").Get(f.ctx, "a", metav1.GetOptions{}); err != nil || got.Data["k"] != "v" {
		t.Errorf("configmap mine/a after the requests: %+v, %v", got, err)
	}

	// The shapes kube does route still serve.
	for _, tc := range []struct{ path, want string }{
		{"/api/v1/namespaces", `"kind":"NamespaceList"`},
		{"/api/v1/namespaces/other", `"name":"other"`},
		{"/api/v1/namespaces/other/status", `"name":"other"`},
		{"/api/v1/configmaps", `"kind":"ConfigMapList"`},
		{"/api/v1/namespaces/mine/configmaps/a", `"name":"a"`},
	} {
		if code, body := do(t, http.MethodGet, f.url+tc.path, ""); code != http.StatusOK || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s, want 200 with %s", tc.path, code, body, tc.want)
		}
	}
}

func namespacesResource(t testing.TB) *resource.Resource {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("Namespace"), "NamespaceList")
	if err != nil {
		t.Fatal(err)
	}
	return &resource.Resource{
		GroupVersionResource: corev1.SchemeGroupVersion.WithResource("namespaces"),
		Kind:                 "Namespace",
		Singular:             "namespace",
		Subresources:         resource.Subresources{Status: true},
		Objects:              objs,
	}
}

func (f *fixture) seedNamespace(name string) {
	f.t.Helper()
	s, k := f.store(corev1.SchemeGroupVersion.WithResource("namespaces"))
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.Create(f.ctx, k.Object("", name), ns); err != nil {
		f.t.Fatalf("seed namespace %s: %v", name, err)
	}
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch method {
	case http.MethodPatch:
		req.Header.Set("Content-Type", "application/merge-patch+json")
	case http.MethodPut, http.MethodPost:
		req.Header.Set("Content-Type", "application/json")
	}
	// A path served as a watch would stream until the wait bounds it.
	resp, err := (&http.Client{Timeout: wait}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(out)
}
