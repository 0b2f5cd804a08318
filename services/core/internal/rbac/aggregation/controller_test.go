package aggregation_test

import (
	"context"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/services/core/internal/coretest"
)

func rule(verb, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{resource}}
}

func selecting(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

// TestChain checks that a change travels along a chain of selections:
// top selects middle, which selects the leaves.
func TestChain(t *testing.T) {
	c := coretest.Start(t, coretest.Options{})
	kube, err := kubernetes.NewForConfig(c.Replicas[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	roles := kube.RbacV1().ClusterRoles()
	create := func(r *rbacv1.ClusterRole) {
		t.Helper()
		if _, err := roles.Create(ctx, r, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "top"}, AggregationRule: selecting("test/to-top")})
	// middle selects itself too: its own rules never count.
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "middle", Labels: map[string]string{"test/to-top": "true", "test/to-middle": "true"}}, AggregationRule: selecting("test/to-middle")})
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "leaf-b", Labels: map[string]string{"test/to-middle": "true"}}, Rules: []rbacv1.PolicyRule{rule("get", "secrets"), rule("get", "configmaps")}})
	create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "leaf-a", Labels: map[string]string{"test/to-middle": "true"}}, Rules: []rbacv1.PolicyRule{rule("get", "configmaps")}})

	want := func(name string, rules ...rbacv1.PolicyRule) {
		t.Helper()
		var got []rbacv1.PolicyRule
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			r, err := roles.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got = r.Rules
			return equality.Semantic.DeepEqual(got, rules), nil
		})
		if err != nil {
			t.Fatalf("%s rules %v, want %v", name, got, rules)
		}
	}
	// Roles by name, each rule once.
	want("middle", rule("get", "configmaps"), rule("get", "secrets"))
	want("top", rule("get", "configmaps"), rule("get", "secrets"))

	leaf, err := roles.Get(ctx, "leaf-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	leaf.Rules = []rbacv1.PolicyRule{rule("list", "secrets")}
	if _, err := roles.Update(ctx, leaf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("top", rule("get", "configmaps"), rule("list", "secrets"))

	if err := roles.Delete(ctx, "leaf-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want("top", rule("list", "secrets"))

	// An aggregated role's own rules are replaced by what it selects.
	top, err := roles.Get(ctx, "top", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	top.Rules = append(top.Rules, rule("delete", "namespaces"))
	if _, err := roles.Update(ctx, top, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want("top", rule("list", "secrets"))
}
