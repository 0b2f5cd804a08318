package rbac

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
)

func TestRulesFor(t *testing.T) {
	idx := NewIndex()
	view := clusterRole("view", nil, rule(l("get", "list"), l(""), l("pods")), urlRule(l("get"), "/healthz"))
	idx.SetClusterRole(&view)
	local := role("ns1", "local", rule(l("*"), l("batch"), l("jobs"), "j1"))
	idx.SetRole(&local)
	for _, b := range []rbacv1.ClusterRoleBinding{
		crb("viewers", "ClusterRole", "view", group("devs")),
		crb("missing", "ClusterRole", "gone", user("alice")),
		crb("others", "ClusterRole", "view", user("bob")),
	} {
		idx.SetClusterRoleBinding(&b)
	}
	for _, b := range []rbacv1.RoleBinding{
		rb("ns1", "jobs", "Role", "local", user("alice")),
		rb("ns2", "jobs", "Role", "local", user("alice")),
	} {
		idx.SetRoleBinding(&b)
	}
	cases := []struct {
		name      string
		user      string
		groups    []string
		namespace string
		want      []rbacv1.PolicyRule
		errs      string
	}{
		{"nothing", "carol", nil, "ns1", nil, "[]"},
		{"cluster and namespaced", "alice", l("devs"), "ns1", append(view.Rules, local.Rules...), `[clusterrole.rbac.authorization.k8s.io "gone" not found]`},
		{"missing role in namespace", "alice", nil, "ns2", nil, `[clusterrole.rbac.authorization.k8s.io "gone" not found role.rbac.authorization.k8s.io "local" not found]`},
		{"no namespace: cluster only", "alice", l("devs"), "", view.Rules, `[clusterrole.rbac.authorization.k8s.io "gone" not found]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rules, errs := idx.RulesFor(c.user, c.groups, c.namespace)
			if diff := cmp.Diff(c.want, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if got := fmt.Sprint(errs); got != c.errs {
				t.Errorf("errors = %s, want %s", got, c.errs)
			}
		})
	}
}
