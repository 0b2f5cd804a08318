package regopolicy

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestConfigMapModules: every data value of every ConfigMap is a module,
// named so that equal keys of two ConfigMaps do not collide, and they
// compile together.
func TestConfigMapModules(t *testing.T) {
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "a"}, Data: map[string]string{"p.rego": "package kplane.test.a\ndeny contains \"a\" if true"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "b"}, Data: map[string]string{
			"p.rego": "package kplane.test.b\ndeny contains \"b\" if true",
			"q.rego": "package kplane.test.b\ndeny contains \"q\" if true",
		}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "empty"}},
	}
	modules := ConfigMapModules(cms)
	want := []string{"configmaps/kube-system/a/p.rego", "configmaps/kube-system/b/p.rego", "configmaps/kube-system/b/q.rego"}
	if got := slices.Sorted(maps.Keys(modules)); !slices.Equal(got, want) {
		t.Fatalf("modules %q, want %q", got, want)
	}
	e := newEngine(t)
	if err := e.SetSource(context.Background(), ConfigMapSource, modules); err != nil {
		t.Fatal(err)
	}
	if got := denies(t, e, nil); !slices.Equal(got, []string{"a", "b", "q"}) {
		t.Errorf("deny %q", got)
	}
}
