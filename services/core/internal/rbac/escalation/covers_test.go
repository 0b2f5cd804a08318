package escalation

import (
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

func TestCovers(t *testing.T) {
	res := func(verbs, groups, resources, names []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
	}
	url := func(verbs, urls []string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
	}
	s := func(v ...string) []string { return v }
	cases := []struct {
		name           string
		owner, servant []rbacv1.PolicyRule
		covered        bool
		missing        int
	}{
		{"exact", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, true, 0},
		{"more verbs than held", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get", "list"), s(""), s("secrets"), nil)}, false, 1},
		{"verb wildcard", []rbacv1.PolicyRule{res(s("*"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get", "delete"), s(""), s("secrets"), nil)}, true, 0},
		{"group wildcard", []rbacv1.PolicyRule{res(s("get"), s("*"), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get"), s("", "apps"), s("secrets"), nil)}, true, 0},
		{"resource wildcard", []rbacv1.PolicyRule{res(s("get"), s(""), s("*"), nil)}, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets", "pods/log"), nil)}, true, 0},
		{"subresource wildcard", []rbacv1.PolicyRule{res(s("get"), s(""), s("*/scale"), nil)}, []rbacv1.PolicyRule{res(s("get"), s(""), s("deployments/scale", "deployments"), nil)}, false, 1},
		{"servant wildcard needs owner wildcard", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get"), s(""), s("*"), nil)}, false, 1},
		{"names within unnamed", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), s("a", "b"))}, true, 0},
		{"unnamed not within named", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), s("a"))}, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil)}, false, 1},
		{"other name", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), s("a"))}, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), s("a", "b"))}, false, 1},
		{"url exact", []rbacv1.PolicyRule{url(s("get"), s("/healthz"))}, []rbacv1.PolicyRule{url(s("get"), s("/healthz"))}, true, 0},
		{"url prefix", []rbacv1.PolicyRule{url(s("get"), s("/apis/*"))}, []rbacv1.PolicyRule{url(s("get"), s("/apis/apps", "/api"))}, false, 1},
		{"url star", []rbacv1.PolicyRule{url(s("*"), s("*"))}, []rbacv1.PolicyRule{url(s("get", "post"), s("/metrics"))}, true, 0},
		{"urls not from resources", []rbacv1.PolicyRule{res(s("*"), s("*"), s("*"), nil)}, []rbacv1.PolicyRule{url(s("get"), s("/metrics"))}, false, 1},
		{"split across owner rules", []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets"), nil), res(s("list"), s(""), s("secrets"), nil)}, []rbacv1.PolicyRule{res(s("get", "list"), s(""), s("secrets"), nil)}, true, 0},
		{"nothing held", nil, []rbacv1.PolicyRule{res(s("get"), s(""), s("secrets", "configmaps"), nil)}, false, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			covered, missing := Covers(tc.owner, tc.servant)
			if covered != tc.covered || len(missing) != tc.missing {
				t.Fatalf("Covers = %v, %v; want %v with %d missing", covered, missing, tc.covered, tc.missing)
			}
		})
	}
}

func TestCompactString(t *testing.T) {
	cases := []struct {
		rule rbacv1.PolicyRule
		want string
	}{
		{rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}, `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{rbacv1.PolicyRule{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}, `{NonResourceURLs:["/metrics"], Verbs:["get"]}`},
		{rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"web"}, Verbs: []string{"get", "list"}}, `{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["web"], Verbs:["get" "list"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			if got := compactString(tc.rule); got != tc.want {
				t.Fatalf("got %s", got)
			}
		})
	}
}
