package bootstrap_test

import (
	"context"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/services/core/internal/coretest"
	"kplane.dev/services/core/internal/rbac/bootstrap"
)

func TestBootstrapPolicy(t *testing.T) {
	c := coretest.Start(t, coretest.Options{})
	kube, err := kubernetes.NewForConfig(c.Replicas[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	t.Run("created at start", func(t *testing.T) {
		for _, want := range bootstrap.ClusterRoles() {
			got, err := kube.RbacV1().ClusterRoles().Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("clusterrole %s: %v", want.Name, err)
			}
			if got.Labels["kubernetes.io/bootstrapping"] != "rbac-defaults" || got.Annotations[rbacv1.AutoUpdateAnnotationKey] != "true" {
				t.Errorf("clusterrole %s metadata: labels %v annotations %v", want.Name, got.Labels, got.Annotations)
			}
		}
		for _, tc := range []struct {
			name   string
			groups []string
		}{
			{"cluster-admin", []string{"system:masters"}},
			{"system:discovery", []string{"system:authenticated"}},
			{"system:basic-user", []string{"system:authenticated"}},
			{"system:monitoring", []string{"system:monitoring"}},
			{"system:public-info-viewer", []string{"system:authenticated", "system:unauthenticated"}},
			{"system:service-account-issuer-discovery", []string{"system:serviceaccounts"}},
		} {
			b, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, tc.name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("clusterrolebinding %s: %v", tc.name, err)
			}
			var groups []string
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.GroupKind && s.APIGroup == rbacv1.GroupName {
					groups = append(groups, s.Name)
				}
			}
			if !slices.Equal(groups, tc.groups) || b.RoleRef != (rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: tc.name}) {
				t.Errorf("clusterrolebinding %s: groups %v roleRef %+v", tc.name, groups, b.RoleRef)
			}
		}
	})

	t.Run("admin aggregates edit and view", func(t *testing.T) {
		rules := func(name string) []rbacv1.PolicyRule {
			r, err := kube.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return r.Rules
		}
		// Selected roles come by name: edit before system:aggregate-to-admin,
		// system:aggregate-to-edit before view.
		view := rules("system:aggregate-to-view")
		edit := append(rules("system:aggregate-to-edit"), view...)
		admin := append(slices.Clone(edit), rules("system:aggregate-to-admin")...)
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return equality.Semantic.DeepEqual(rules("view"), view) &&
				equality.Semantic.DeepEqual(rules("edit"), edit) &&
				equality.Semantic.DeepEqual(rules("admin"), admin), nil
		})
		if err != nil {
			t.Fatalf("aggregated roles: view %v\nedit %v\nadmin %v", rules("view"), rules("edit"), rules("admin"))
		}
	})

	t.Run("existing objects are kept", func(t *testing.T) {
		d, err := kube.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/version"}}}
		if _, err := kube.RbacV1().ClusterRoles().Update(ctx, d, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kube.RbacV1().ClusterRoleBindings().Delete(ctx, "system:basic-user", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := bootstrap.Ensure(ctx, kube); err != nil {
			t.Fatal(err)
		}
		got, err := kube.RbacV1().ClusterRoles().Get(ctx, "system:discovery", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got.Rules, d.Rules) {
			t.Fatalf("system:discovery overwritten: %v", got.Rules)
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, "system:basic-user", metav1.GetOptions{}); err != nil {
			t.Fatalf("deleted binding not recreated: %v", err)
		}
	})
}
