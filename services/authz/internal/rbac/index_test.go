package rbac

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIncrementalUpdates changes one object at a time and checks that each
// decision follows the change.
func TestIncrementalUpdates(t *testing.T) {
	idx := NewIndex()
	a, err := NewAuthorizer(context.Background(), idx)
	if err != nil {
		t.Fatal(err)
	}
	getPod := res("alice", nil, "get", "", "pods", "", "ns1", "p")
	getPodBob := res("bob", nil, "get", "", "pods", "", "ns1", "p")
	listCMs := res("alice", nil, "list", "", "configmaps", "", "", "")

	steps := []struct {
		name   string
		change func()
		attrs  Attributes
		want   Decision
		reason string
	}{
		{"empty", func() {}, getPod, none, ""},
		{"binding before its role", func() {
			b := rb("ns1", "b", "Role", "reader", user("alice"))
			idx.SetRoleBinding(&b)
		}, getPod, none, `RBAC: role.rbac.authorization.k8s.io "reader" not found`},
		{"role added", func() {
			r := role("ns1", "reader", rule(l("get"), l(""), l("pods")))
			idx.SetRole(&r)
		}, getPod, allow, `RBAC: allowed by RoleBinding "b/ns1" of Role "reader" to User "alice"`},
		{"binding moved to bob: alice", func() {
			b := rb("ns1", "b", "Role", "reader", user("bob"))
			idx.SetRoleBinding(&b)
		}, getPod, none, ""},
		{"binding moved to bob: bob", func() {}, getPodBob, allow, `RBAC: allowed by RoleBinding "b/ns1" of Role "reader" to User "bob"`},
		{"role rules replaced", func() {
			r := role("ns1", "reader", rule(l("list"), l(""), l("pods")))
			idx.SetRole(&r)
		}, getPodBob, none, ""},
		{"role deleted", func() { idx.DeleteRole("ns1", "reader") }, getPodBob, none, `RBAC: role.rbac.authorization.k8s.io "reader" not found`},
		{"binding deleted", func() { idx.DeleteRoleBinding("ns1", "b") }, getPodBob, none, ""},
		{"aggregated role without members", func() {
			agg := aggregatedClusterRole("view", nil, metav1.LabelSelector{MatchLabels: map[string]string{"view": "true"}})
			idx.SetClusterRole(&agg)
			b := crb("viewers", "ClusterRole", "view", user("alice"))
			idx.SetClusterRoleBinding(&b)
		}, listCMs, none, ""},
		{"member added", func() {
			m := clusterRole("view-cms", map[string]string{"view": "true"}, rule(l("list"), l(""), l("configmaps")))
			idx.SetClusterRole(&m)
		}, listCMs, allow, `RBAC: allowed by ClusterRoleBinding "viewers" of ClusterRole "view" to User "alice"`},
		{"member relabelled out", func() {
			m := clusterRole("view-cms", map[string]string{"view": "false"}, rule(l("list"), l(""), l("configmaps")))
			idx.SetClusterRole(&m)
		}, listCMs, none, ""},
		{"member relabelled in", func() {
			m := clusterRole("view-cms", map[string]string{"view": "true"}, rule(l("list"), l(""), l("configmaps")))
			idx.SetClusterRole(&m)
		}, listCMs, allow, `RBAC: allowed by ClusterRoleBinding "viewers" of ClusterRole "view" to User "alice"`},
		{"member deleted", func() { idx.DeleteClusterRole("view-cms") }, listCMs, none, ""},
		{"aggregated role deleted", func() { idx.DeleteClusterRole("view") }, listCMs, none, `RBAC: clusterrole.rbac.authorization.k8s.io "view" not found`},
		{"cluster binding deleted", func() { idx.DeleteClusterRoleBinding("viewers") }, listCMs, none, ""},
		{"deleting absent objects", func() {
			idx.DeleteRole("ns1", "nope")
			idx.DeleteClusterRole("nope")
			idx.DeleteRoleBinding("ns9", "nope")
			idx.DeleteClusterRoleBinding("nope")
		}, listCMs, none, ""},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			got, reason, err := a.Authorize(context.Background(), step.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if got != step.want || reason != step.reason {
				t.Errorf("got %v %q, want %v %q", got, reason, step.want, step.reason)
			}
		})
	}
	// Deleting every binding leaves no index entries behind: a long-running
	// replica's memory follows its objects.
	if len(idx.clusterBySubject) != 0 || len(idx.namespacedBySubject) != 0 {
		t.Errorf("index keeps entries of deleted bindings: %v %v", idx.clusterBySubject, idx.namespacedBySubject)
	}
}
