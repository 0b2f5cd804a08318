package rbac

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func rule(verbs, groups, resources []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: groups, Resources: resources, ResourceNames: names}
}

func urlRule(verbs []string, urls ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, NonResourceURLs: urls}
}

func l(s ...string) []string { return s }

func clusterRole(name string, labels map[string]string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: rules}
}

func aggregatedClusterRole(name string, labels map[string]string, selectors ...metav1.LabelSelector) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{
		ObjectMeta:      metav1.ObjectMeta{Name: name, Labels: labels},
		AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: selectors},
	}
}

func role(namespace, name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Rules: rules}
}

func user(name string) rbacv1.Subject  { return rbacv1.Subject{Kind: "User", Name: name} }
func group(name string) rbacv1.Subject { return rbacv1.Subject{Kind: "Group", Name: name} }
func sa(namespace, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: "ServiceAccount", Namespace: namespace, Name: name}
}

func crb(name, kind, roleName string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName},
		Subjects:   subjects,
	}
}

func rb(namespace, name, kind, roleName string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: roleName},
		Subjects:   subjects,
	}
}

// conformanceWorld exercises every part of the semantics: wildcards,
// resourceNames, subresources, non-resource URLs, aggregation (nested, and
// by matchExpressions), groups, service accounts, namespaced and cluster
// bindings, and roles that do not exist.
func conformanceWorld() world {
	return world{
		clusterRoles: []rbacv1.ClusterRole{
			clusterRole("cluster-admin", nil, rule(l("*"), l("*"), l("*")), urlRule(l("*"), "*")),
			clusterRole("pod-reader", nil, rule(l("get", "list", "watch"), l(""), l("pods"))),
			clusterRole("secret-getter", nil, rule(l("get", "update"), l(""), l("secrets"), "s1", "s2")),
			clusterRole("status-writer", nil, rule(l("update", "patch"), l("*"), l("*/status"))),
			clusterRole("pod-logs", nil, rule(l("get"), l(""), l("pods/log"))),
			clusterRole("probes", nil, urlRule(l("get"), "/healthz", "/logs/*", "/apis*")),
			clusterRole("deployer", nil, rule(l("get", "update"), l("apps"), l("deployments", "deployments/scale"))),
			clusterRole("verbs-any", nil, rule(l("*"), l("batch"), l("jobs"))),
			clusterRole("view-pods", map[string]string{"aggregate-to-view": "true"}, rule(l("get"), l(""), l("pods"))),
			clusterRole("view-cms", map[string]string{"aggregate-to-view": "true", "tier": "top"}, rule(l("list"), l(""), l("configmaps"))),
			aggregatedClusterRole("view", map[string]string{"tier": "top"},
				metav1.LabelSelector{MatchLabels: map[string]string{"aggregate-to-view": "true"}}),
			clusterRole("extra-services", map[string]string{"tier": "top"}, rule(l("get"), l(""), l("services"))),
			aggregatedClusterRole("top", nil, metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"top"}},
			}}),
			aggregatedClusterRole("empty-aggregate", nil, metav1.LabelSelector{MatchLabels: map[string]string{"nothing": "here"}}),
		},
		roles: []rbacv1.Role{
			role("team-a", "cm-editor", rule(l("create", "update", "delete"), l(""), l("configmaps"))),
			role("team-a", "everything", rule(l("*"), l("*"), l("*"))),
			role("team-b", "sa-reader", rule(l("get"), l(""), l("serviceaccounts"))),
		},
		clusterRoleBindings: []rbacv1.ClusterRoleBinding{
			crb("admins", "ClusterRole", "cluster-admin", group("system:masters")),
			crb("alice-pods", "ClusterRole", "pod-reader", user("alice")),
			crb("ctrl-status", "ClusterRole", "status-writer", sa("kube-system", "ctrl")),
			crb("orphan-sa", "ClusterRole", "pod-reader", sa("", "orphan")),
			crb("probes", "ClusterRole", "probes", group("system:unauthenticated"), group("system:authenticated")),
			crb("mallory-missing", "ClusterRole", "does-not-exist", user("mallory")),
			crb("mallory-missing-again", "ClusterRole", "does-not-exist", user("mallory")),
			crb("ivan-role", "Role", "cm-editor", user("ivan")),
			crb("viewers", "ClusterRole", "view", group("viewers")),
			crb("tara-top", "ClusterRole", "top", user("tara")),
			crb("sam-secrets", "ClusterRole", "secret-getter", user("sam")),
			crb("deployers", "ClusterRole", "deployer", group("deployers")),
			crb("logger-logs", "ClusterRole", "pod-logs", sa("team-a", "logger")),
			crb("wanda-kind", "Foo", "x", user("wanda")),
			crb("jobs", "ClusterRole", "verbs-any", user("nobody"), user("jane")),
			crb("erin-empty", "ClusterRole", "empty-aggregate", user("erin")),
		},
		roleBindings: []rbacv1.RoleBinding{
			rb("team-a", "bob-cm", "Role", "cm-editor", user("bob")),
			rb("team-a", "bob-pods", "ClusterRole", "pod-reader", user("bob")),
			rb("team-a", "builder", "Role", "everything", sa("", "builder")),
			rb("team-a", "reader-from-b", "ClusterRole", "pod-reader", sa("team-b", "reader")),
			rb("team-a", "team-b-sas", "Role", "cm-editor", group("system:serviceaccounts:team-b")),
			rb("team-b", "bob-gone", "Role", "gone", user("bob")),
			rb("team-b", "bob-gone-cluster", "ClusterRole", "does-not-exist", user("bob")),
			rb("team-b", "all-sas", "Role", "sa-reader", group("system:serviceaccounts")),
			rb("team-b", "mallory-local", "Role", "missing-local", user("mallory")),
		},
	}
}

type conformanceCase struct {
	name     string
	attrs    Attributes
	decision Decision
	reason   string
}

func res(user string, groups []string, verb, apiGroup, resource, subresource, namespace, name string) Attributes {
	return Attributes{User: user, Groups: groups, ResourceRequest: true, Verb: verb, APIGroup: apiGroup,
		Resource: resource, Subresource: subresource, Namespace: namespace, Name: name}
}

func nonRes(user string, groups []string, verb, path string) Attributes {
	return Attributes{User: user, Groups: groups, Verb: verb, Path: path}
}

const (
	allow = DecisionAllow
	none  = DecisionNoOpinion
)

var authd = l("system:authenticated")

func saUser(namespace, name string) string { return "system:serviceaccount:" + namespace + ":" + name }

func saGroups(namespace string) []string {
	return l("system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
}

// conformanceCases are written by hand from kube's RBAC rules and messages.
func conformanceCases() []conformanceCase {
	const (
		byAdmins    = `RBAC: allowed by ClusterRoleBinding "admins" of ClusterRole "cluster-admin" to Group "system:masters"`
		byAlice     = `RBAC: allowed by ClusterRoleBinding "alice-pods" of ClusterRole "pod-reader" to User "alice"`
		byCtrl      = `RBAC: allowed by ClusterRoleBinding "ctrl-status" of ClusterRole "status-writer" to ServiceAccount "ctrl/kube-system"`
		byProbesU   = `RBAC: allowed by ClusterRoleBinding "probes" of ClusterRole "probes" to Group "system:unauthenticated"`
		byProbesA   = `RBAC: allowed by ClusterRoleBinding "probes" of ClusterRole "probes" to Group "system:authenticated"`
		byViewers   = `RBAC: allowed by ClusterRoleBinding "viewers" of ClusterRole "view" to Group "viewers"`
		byTara      = `RBAC: allowed by ClusterRoleBinding "tara-top" of ClusterRole "top" to User "tara"`
		bySam       = `RBAC: allowed by ClusterRoleBinding "sam-secrets" of ClusterRole "secret-getter" to User "sam"`
		byDeployers = `RBAC: allowed by ClusterRoleBinding "deployers" of ClusterRole "deployer" to Group "deployers"`
		byLogger    = `RBAC: allowed by ClusterRoleBinding "logger-logs" of ClusterRole "pod-logs" to ServiceAccount "logger/team-a"`
		byJobs      = `RBAC: allowed by ClusterRoleBinding "jobs" of ClusterRole "verbs-any" to User "jane"`
		byBobCM     = `RBAC: allowed by RoleBinding "bob-cm/team-a" of Role "cm-editor" to User "bob"`
		byBobPods   = `RBAC: allowed by RoleBinding "bob-pods/team-a" of ClusterRole "pod-reader" to User "bob"`
		byBuilder   = `RBAC: allowed by RoleBinding "builder/team-a" of Role "everything" to ServiceAccount "builder/team-a"`
		byReaderB   = `RBAC: allowed by RoleBinding "reader-from-b/team-a" of ClusterRole "pod-reader" to ServiceAccount "reader/team-b"`
		byTeamBSAs  = `RBAC: allowed by RoleBinding "team-b-sas/team-a" of Role "cm-editor" to Group "system:serviceaccounts:team-b"`
		byAllSAs    = `RBAC: allowed by RoleBinding "all-sas/team-b" of Role "sa-reader" to Group "system:serviceaccounts"`
		bobMissing  = `RBAC: [role.rbac.authorization.k8s.io "gone" not found, clusterrole.rbac.authorization.k8s.io "does-not-exist" not found]`
		malMissing  = `RBAC: clusterrole.rbac.authorization.k8s.io "does-not-exist" not found`
		malBoth     = `RBAC: [clusterrole.rbac.authorization.k8s.io "does-not-exist" not found, role.rbac.authorization.k8s.io "missing-local" not found]`
		ivanMissing = `RBAC: role.rbac.authorization.k8s.io "cm-editor" not found`
		wandaKind   = `RBAC: unsupported role reference kind: "Foo"`
	)
	masters := l("system:masters", "system:authenticated")
	return []conformanceCase{
		// Wildcards: cluster-admin's "*" verbs, groups, resources and URLs.
		{"admin get pod", res("root", masters, "get", "", "pods", "", "ns1", "p"), allow, byAdmins},
		{"admin delete node", res("root", masters, "delete", "", "nodes", "", "", "n1"), allow, byAdmins},
		{"admin any verb", res("root", masters, "escalate", "rbac.authorization.k8s.io", "clusterroles", "", "", "x"), allow, byAdmins},
		{"admin subresource", res("root", masters, "create", "", "pods", "exec", "ns1", "p"), allow, byAdmins},
		{"admin custom group", res("root", masters, "list", "example.com", "widgets", "", "", ""), allow, byAdmins},
		{"admin non-resource", nonRes("root", masters, "get", "/metrics"), allow, byAdmins},
		{"admin non-resource post", nonRes("root", masters, "post", "/anything/at/all"), allow, byAdmins},
		{"admin root path", nonRes("root", masters, "get", "/"), allow, byAdmins},
		{"masters group alone", res("x", l("system:masters"), "watch", "apps", "deployments", "", "", ""), allow, byAdmins},
		{"admin group name is case sensitive", res("x", l("System:Masters"), "get", "", "pods", "", "ns1", "p"), none, ""},
		// Exact verbs, groups and resources.
		{"alice get pod", res("alice", authd, "get", "", "pods", "", "ns1", "p"), allow, byAlice},
		{"alice list pods", res("alice", authd, "list", "", "pods", "", "ns1", ""), allow, byAlice},
		{"alice list pods all namespaces", res("alice", authd, "list", "", "pods", "", "", ""), allow, byAlice},
		{"alice watch pods", res("alice", authd, "watch", "", "pods", "", "ns2", ""), allow, byAlice},
		{"alice delete pod", res("alice", authd, "delete", "", "pods", "", "ns1", "p"), none, ""},
		{"alice create pod", res("alice", authd, "create", "", "pods", "", "ns1", ""), none, ""},
		{"alice get pods in other group", res("alice", authd, "get", "apps", "pods", "", "ns1", "p"), none, ""},
		{"alice get services", res("alice", authd, "get", "", "services", "", "ns1", "s"), none, ""},
		{"alice pod status is a subresource", res("alice", authd, "get", "", "pods", "status", "ns1", "p"), none, ""},
		{"alice pod log is a subresource", res("alice", authd, "get", "", "pods", "log", "ns1", "p"), none, ""},
		{"alice non-resource with resource rule", nonRes("alice", nil, "get", "/api/v1/pods"), none, ""},
		{"alice user name is exact", res("Alice", authd, "get", "", "pods", "", "ns1", "p"), none, ""},
		{"alice as group is not alice", res("eve", l("alice"), "get", "", "pods", "", "ns1", "p"), none, ""},
		{"no user no groups", res("", nil, "get", "", "pods", "", "ns1", "p"), none, ""},
		// Wildcard verbs only.
		{"jane any verb on jobs", res("jane", nil, "deletecollection", "batch", "jobs", "", "ns1", ""), allow, byJobs},
		{"jane custom verb on jobs", res("jane", nil, "frobnicate", "batch", "jobs", "", "", ""), allow, byJobs},
		{"jane jobs in other group", res("jane", nil, "get", "", "jobs", "", "ns1", "j"), none, ""},
		{"jane cronjobs", res("jane", nil, "get", "batch", "cronjobs", "", "ns1", "j"), none, ""},
		{"jane jobs status", res("jane", nil, "get", "batch", "jobs", "status", "ns1", "j"), none, ""},
		{"second subject of binding", res("nobody", nil, "get", "batch", "jobs", "", "ns1", "j"), allow, `RBAC: allowed by ClusterRoleBinding "jobs" of ClusterRole "verbs-any" to User "nobody"`},
		// resourceNames.
		{"sam get named secret", res("sam", nil, "get", "", "secrets", "", "ns1", "s1"), allow, bySam},
		{"sam get other named secret", res("sam", nil, "get", "", "secrets", "", "ns2", "s2"), allow, bySam},
		{"sam update named secret", res("sam", nil, "update", "", "secrets", "", "ns1", "s2"), allow, bySam},
		{"sam get unnamed secret", res("sam", nil, "get", "", "secrets", "", "ns1", "s3"), none, ""},
		{"sam get without name", res("sam", nil, "get", "", "secrets", "", "ns1", ""), none, ""},
		{"sam list secrets", res("sam", nil, "list", "", "secrets", "", "ns1", ""), none, ""},
		{"sam watch secrets", res("sam", nil, "watch", "", "secrets", "", "ns1", ""), none, ""},
		{"sam create secret", res("sam", nil, "create", "", "secrets", "", "ns1", ""), none, ""},
		{"sam delete named secret", res("sam", nil, "delete", "", "secrets", "", "ns1", "s1"), none, ""},
		{"sam name is case sensitive", res("sam", nil, "get", "", "secrets", "", "ns1", "S1"), none, ""},
		{"sam named configmap", res("sam", nil, "get", "", "configmaps", "", "ns1", "s1"), none, ""},
		// Subresources: "*/status" and "resource/subresource".
		{"ctrl update pod status", res(saUser("kube-system", "ctrl"), saGroups("kube-system"), "update", "", "pods", "status", "ns1", "p"), allow, byCtrl},
		{"ctrl patch deployment status", res(saUser("kube-system", "ctrl"), saGroups("kube-system"), "patch", "apps", "deployments", "status", "ns1", "d"), allow, byCtrl},
		{"ctrl update node status", res(saUser("kube-system", "ctrl"), nil, "update", "", "nodes", "status", "", "n1"), allow, byCtrl},
		{"ctrl update pod", res(saUser("kube-system", "ctrl"), saGroups("kube-system"), "update", "", "pods", "", "ns1", "p"), none, ""},
		{"ctrl update pod scale", res(saUser("kube-system", "ctrl"), saGroups("kube-system"), "update", "", "pods", "scale", "ns1", "p"), none, ""},
		{"ctrl get pod status", res(saUser("kube-system", "ctrl"), saGroups("kube-system"), "get", "", "pods", "status", "ns1", "p"), none, ""},
		{"ctrl subresource named like a suffix", res(saUser("kube-system", "ctrl"), nil, "update", "", "pods", "xstatus", "ns1", "p"), none, ""},
		{"ctrl resource named status", res(saUser("kube-system", "ctrl"), nil, "update", "", "status", "", "ns1", "p"), none, ""},
		{"ctrl other namespace sa", res(saUser("default", "ctrl"), saGroups("default"), "update", "", "pods", "status", "ns1", "p"), none, ""},
		{"logger get pod log", res(saUser("team-a", "logger"), saGroups("team-a"), "get", "", "pods", "log", "team-b", "p"), allow, byLogger},
		{"logger get pod", res(saUser("team-a", "logger"), saGroups("team-a"), "get", "", "pods", "", "team-b", "p"), none, ""},
		{"logger get pod exec", res(saUser("team-a", "logger"), saGroups("team-a"), "get", "", "pods", "exec", "team-b", "p"), none, ""},
		{"logger get services log", res(saUser("team-a", "logger"), saGroups("team-a"), "get", "", "services", "log", "team-b", "p"), none, ""},
		{"deployers update scale", res("dan", l("deployers"), "update", "apps", "deployments", "scale", "ns1", "d"), allow, byDeployers},
		{"deployers get deployment", res("dan", l("deployers"), "get", "apps", "deployments", "", "ns1", "d"), allow, byDeployers},
		{"deployers deployment status", res("dan", l("deployers"), "get", "apps", "deployments", "status", "ns1", "d"), none, ""},
		{"deployers core group", res("dan", l("deployers"), "get", "", "deployments", "", "ns1", "d"), none, ""},
		{"deployers extensions group", res("dan", l("deployers"), "get", "extensions", "deployments", "", "ns1", "d"), none, ""},
		{"deployers delete", res("dan", l("deployers"), "delete", "apps", "deployments", "", "ns1", "d"), none, ""},
		{"deployers statefulsets", res("dan", l("deployers"), "get", "apps", "statefulsets", "", "ns1", "s"), none, ""},
		// Non-resource URLs.
		{"healthz anonymous", nonRes("system:anonymous", l("system:unauthenticated"), "get", "/healthz"), allow, byProbesU},
		{"healthz authenticated", nonRes("alice", authd, "get", "/healthz"), allow, byProbesA},
		{"healthz post", nonRes("alice", authd, "post", "/healthz"), none, ""},
		{"healthz subpath not exact", nonRes("alice", authd, "get", "/healthz/etcd"), none, ""},
		{"healthz trailing slash", nonRes("alice", authd, "get", "/healthz/"), none, ""},
		{"logs prefix", nonRes("alice", authd, "get", "/logs/kube.log"), allow, byProbesA},
		{"logs prefix deep", nonRes("alice", authd, "get", "/logs/a/b/c"), allow, byProbesA},
		{"logs prefix itself", nonRes("alice", authd, "get", "/logs/"), allow, byProbesA},
		{"logs without slash", nonRes("alice", authd, "get", "/logs"), none, ""},
		{"apis prefix without slash", nonRes("alice", authd, "get", "/apis"), allow, byProbesA},
		{"apis prefix longer word", nonRes("alice", authd, "get", "/apisix"), allow, byProbesA},
		{"apis group path", nonRes("alice", authd, "get", "/apis/apps/v1"), allow, byProbesA},
		{"api is not apis", nonRes("alice", authd, "get", "/api"), none, ""},
		{"version not listed", nonRes("alice", authd, "get", "/version"), none, ""},
		{"no groups no URLs", nonRes("alice", nil, "get", "/healthz"), none, ""},
		{"resource request with URL rule", res("alice", l("system:unauthenticated"), "get", "", "healthz", "", "", ""), none, ""},
		// Aggregated ClusterRoles.
		{"view aggregates pods", res("vic", l("viewers"), "get", "", "pods", "", "ns1", "p"), allow, byViewers},
		{"view aggregates configmaps", res("vic", l("viewers"), "list", "", "configmaps", "", "ns1", ""), allow, byViewers},
		{"view does not aggregate services", res("vic", l("viewers"), "get", "", "services", "", "ns1", "s"), none, ""},
		{"view get configmap not list", res("vic", l("viewers"), "get", "", "configmaps", "", "ns1", "c"), none, ""},
		{"view list pods not aggregated", res("vic", l("viewers"), "list", "", "pods", "", "ns1", ""), none, ""},
		{"nested aggregate via view", res("tara", nil, "get", "", "pods", "", "ns1", "p"), allow, byTara},
		{"nested aggregate direct member", res("tara", nil, "get", "", "services", "", "ns1", "s"), allow, byTara},
		{"nested aggregate member of both", res("tara", nil, "list", "", "configmaps", "", "", ""), allow, byTara},
		{"nested aggregate not more", res("tara", nil, "delete", "", "pods", "", "ns1", "p"), none, ""},
		{"aggregate selecting nothing", res("erin", nil, "get", "", "pods", "", "ns1", "p"), none, ""},
		// Namespaced bindings.
		{"bob create cm in team-a", res("bob", authd, "create", "", "configmaps", "", "team-a", ""), allow, byBobCM},
		{"bob delete cm in team-a", res("bob", authd, "delete", "", "configmaps", "", "team-a", "c"), allow, byBobCM},
		{"bob get cm in team-a", res("bob", authd, "get", "", "configmaps", "", "team-a", "c"), none, ""},
		{"bob get pods in team-a", res("bob", authd, "get", "", "pods", "", "team-a", "p"), allow, byBobPods},
		{"bob get pods in team-c", res("bob", authd, "get", "", "pods", "", "team-c", "p"), none, ""},
		{"bob list pods all namespaces", res("bob", authd, "list", "", "pods", "", "", ""), none, ""},
		{"bob create cm in team-c", res("bob", authd, "create", "", "configmaps", "", "team-c", ""), none, ""},
		{"bob non-resource", nonRes("bob", nil, "get", "/configmaps"), none, ""},
		// Service accounts.
		{"builder anything in team-a", res(saUser("team-a", "builder"), saGroups("team-a"), "delete", "apps", "deployments", "", "team-a", "d"), allow, byBuilder},
		{"builder subresource in team-a", res(saUser("team-a", "builder"), saGroups("team-a"), "create", "", "pods", "exec", "team-a", "p"), allow, byBuilder},
		{"builder cluster scope", res(saUser("team-a", "builder"), saGroups("team-a"), "list", "", "namespaces", "", "", ""), none, ""},
		{"builder in team-b", res(saUser("team-a", "builder"), saGroups("team-a"), "get", "", "pods", "", "team-b", "p"), none, ""},
		{"builder of team-b in team-a", res(saUser("team-b", "builder"), nil, "get", "", "pods", "", "team-a", "p"), none, ""},
		{"sa subject in other namespace", res(saUser("team-b", "reader"), nil, "get", "", "pods", "", "team-a", "p"), allow, byReaderB},
		{"sa subject in other namespace, own namespace", res(saUser("team-b", "reader"), nil, "get", "", "pods", "", "team-b", "p"), none, ""},
		{"sa namespace group", res(saUser("team-b", "x"), saGroups("team-b"), "update", "", "configmaps", "", "team-a", "c"), allow, byTeamBSAs},
		{"sa namespace group other ns", res(saUser("team-c", "x"), saGroups("team-c"), "update", "", "configmaps", "", "team-a", "c"), none, ""},
		{"all service accounts group", res(saUser("team-c", "x"), saGroups("team-c"), "get", "", "serviceaccounts", "", "team-b", "s"), allow, byAllSAs},
		{"sa groups are just groups", res("human", l("system:serviceaccounts"), "get", "", "serviceaccounts", "", "team-b", "s"), allow, byAllSAs},
		{"sa user without sa groups", res(saUser("team-c", "x"), nil, "get", "", "serviceaccounts", "", "team-b", "s"), none, ""},
		{"cluster binding sa without namespace", res(saUser("default", "orphan"), nil, "get", "", "pods", "", "ns1", "p"), none, ""},
		{"cluster binding sa without namespace, empty ns user", res("system:serviceaccount::orphan", nil, "get", "", "pods", "", "ns1", "p"), none, ""},
		{"sa name is a user name, not a sa", res("ctrl", nil, "update", "", "pods", "status", "ns1", "p"), none, ""},
		// Missing roles and bad references.
		{"mallory missing cluster role twice", res("mallory", nil, "get", "", "pods", "", "ns1", "p"), none, malMissing},
		{"mallory missing, cluster scope", res("mallory", nil, "list", "", "nodes", "", "", ""), none, malMissing},
		{"mallory missing, non-resource", nonRes("mallory", nil, "get", "/healthz"), none, malMissing},
		{"mallory missing both kinds", res("mallory", nil, "get", "", "pods", "", "team-b", "p"), none, malBoth},
		{"mallory allowed despite missing", res("mallory", l("system:authenticated"), "get", "", "", "", "", ""), none, malMissing},
		{"mallory allowed by group despite missing", nonRes("mallory", l("system:authenticated"), "get", "/healthz"), allow, byProbesA},
		{"bob missing in team-b", res("bob", authd, "get", "", "pods", "", "team-b", "p"), none, bobMissing},
		{"bob missing not in team-a", res("bob", authd, "get", "", "secrets", "", "team-a", "s"), none, ""},
		{"cluster binding to a role", res("ivan", nil, "create", "", "configmaps", "", "team-a", ""), none, ivanMissing},
		{"unsupported role kind", res("wanda", nil, "get", "", "pods", "", "ns1", "p"), none, wandaKind},
		{"error only for subjects bound", res("someone", nil, "get", "", "pods", "", "team-b", "p"), none, ""},
		// Allowed by the first binding in visiting order.
		{"cluster binding before role binding", res("bob", l("system:masters"), "create", "", "configmaps", "", "team-a", ""), allow, byAdmins},
		{"first cluster binding by name", res("alice", l("viewers"), "get", "", "pods", "", "ns1", "p"), allow, byAlice},
	}
}

func newTestAuthorizer(t testing.TB, w world) *Authorizer {
	t.Helper()
	idx := NewIndex()
	w.load(idx)
	a, err := NewAuthorizer(context.Background(), idx)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestConformance(t *testing.T) {
	w := conformanceWorld()
	a := newTestAuthorizer(t, w)
	cases := conformanceCases()
	if len(cases) < 100 {
		t.Fatalf("%d conformance cases, the issue asks for at least 100", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			decision, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if decision != tc.decision || reason != tc.reason {
				t.Errorf("engine: got %v %q, want %v %q", decision, reason, tc.decision, tc.reason)
			}
			refDecision, refReason := referenceAuthorize(w, tc.attrs)
			if refDecision != tc.decision || refReason != tc.reason {
				t.Errorf("reference: got %v %q, want %v %q", refDecision, refReason, tc.decision, tc.reason)
			}
		})
	}
}

func TestAttributesFromSpec(t *testing.T) {
	tests := []struct {
		name string
		spec authorizationv1.SubjectAccessReviewSpec
		want Attributes
	}{
		{
			name: "resource",
			spec: authorizationv1.SubjectAccessReviewSpec{
				User: "u", Groups: l("g"),
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Namespace: "ns", Verb: "get", Group: "apps", Version: "v1", Resource: "deployments", Subresource: "scale", Name: "d",
				},
			},
			want: Attributes{User: "u", Groups: l("g"), ResourceRequest: true, Verb: "get", APIGroup: "apps",
				Resource: "deployments", Subresource: "scale", Namespace: "ns", Name: "d"},
		},
		{
			name: "non-resource",
			spec: authorizationv1.SubjectAccessReviewSpec{
				User:                  "u",
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"},
			},
			want: Attributes{User: "u", Verb: "get", Path: "/healthz"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AttributesFromSpec(tt.spec)
			if got.User != tt.want.User || got.ResourceRequest != tt.want.ResourceRequest || got.Verb != tt.want.Verb ||
				got.APIGroup != tt.want.APIGroup || got.Resource != tt.want.Resource || got.Subresource != tt.want.Subresource ||
				got.Namespace != tt.want.Namespace || got.Name != tt.want.Name || got.Path != tt.want.Path ||
				len(got.Groups) != len(tt.want.Groups) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
