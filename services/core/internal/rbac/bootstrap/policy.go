package bootstrap

import (
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Label and Annotation mark every object of the default policy, as kube
// marks its own.
var (
	Label      = map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}
	Annotation = map[string]string{rbacv1.AutoUpdateAnnotationKey: "true"}
)

// Verb sets of kube's bootstrap policy.
var (
	write     = []string{"create", "update", "patch", "delete", "deletecollection"}
	readWrite = []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
	read      = []string{"get", "list", "watch"}
)

const (
	legacyGroup         = ""
	authenticationGroup = "authentication.k8s.io"
	authorizationGroup  = "authorization.k8s.io"
	coordinationGroup   = "coordination.k8s.io"
	rbacGroup           = "rbac.authorization.k8s.io"

	aggregateToAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateToEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateToView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

// rule is a resource rule with its lists sorted, as kube's rule builder
// makes them.
func rule(verbs []string, group string, resources ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: sorted(verbs), APIGroups: []string{group}, Resources: sorted(resources)}
}

// urls is a non-resource rule.
func urls(verb string, paths ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: []string{verb}, NonResourceURLs: sorted(paths)}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func aggregated(label string) *rbacv1.AggregationRule {
	return &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{label: "true"}}}}
}

// ClusterRoles are the default cluster roles. The aggregated roles' rules
// are kube's for the resources kplane serves.
func ClusterRoles() []rbacv1.ClusterRole {
	roles := []rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "cluster-admin"},
			Rules: []rbacv1.PolicyRule{
				{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
				urls("*", "*"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:discovery"},
			Rules: []rbacv1.PolicyRule{urls("get",
				"/livez", "/readyz", "/healthz",
				"/version", "/version/",
				"/openapi", "/openapi/*",
				"/api", "/api/*",
				"/apis", "/apis/*",
			)},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:basic-user"},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"create"}, authorizationGroup, "selfsubjectaccessreviews", "selfsubjectrulesreviews"),
				rule([]string{"create"}, authenticationGroup, "selfsubjectreviews"),
			},
		},
		{
			// Prometheus and the like read the monitoring endpoints.
			ObjectMeta: metav1.ObjectMeta{Name: "system:monitoring"},
			Rules: []rbacv1.PolicyRule{urls("get",
				"/metrics", "/metrics/slis",
				"/livez", "/readyz", "/healthz",
				"/livez/*", "/readyz/*", "/healthz/*",
			)},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:public-info-viewer"},
			Rules:      []rbacv1.PolicyRule{urls("get", "/livez", "/readyz", "/healthz", "/version", "/version/")},
		},
		{
			ObjectMeta:      metav1.ObjectMeta{Name: "admin"},
			AggregationRule: aggregated(aggregateToAdmin),
		},
		{
			ObjectMeta:      metav1.ObjectMeta{Name: "edit", Labels: map[string]string{aggregateToAdmin: "true"}},
			AggregationRule: aggregated(aggregateToEdit),
		},
		{
			ObjectMeta:      metav1.ObjectMeta{Name: "view", Labels: map[string]string{aggregateToEdit: "true"}},
			AggregationRule: aggregated(aggregateToView),
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-admin", Labels: map[string]string{aggregateToAdmin: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule([]string{"create"}, authorizationGroup, "localsubjectaccessreviews"),
				rule(readWrite, rbacGroup, "roles", "rolebindings"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-edit", Labels: map[string]string{aggregateToEdit: "true"}},
			Rules: []rbacv1.PolicyRule{
				// Read on escalating resources.
				rule(read, legacyGroup, "secrets"),
				rule([]string{"impersonate"}, legacyGroup, "serviceaccounts"),
				rule(write, legacyGroup, "configmaps", "events", "secrets", "serviceaccounts"),
				rule([]string{"create"}, legacyGroup, "serviceaccounts/token"),
				rule(readWrite, coordinationGroup, "leases"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:aggregate-to-view", Labels: map[string]string{aggregateToView: "true"}},
			Rules: []rbacv1.PolicyRule{
				rule(read, legacyGroup, "configmaps", "serviceaccounts"),
				rule(read, legacyGroup, "events"),
				// Reading namespaces at namespace scope shows which
				// namespaces one has access to.
				rule(read, legacyGroup, "namespaces"),
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "system:service-account-issuer-discovery"},
			Rules:      []rbacv1.PolicyRule{urls("get", "/.well-known/openid-configuration", "/openid/v1/jwks")},
		},
	}
	for i := range roles {
		mark(&roles[i].ObjectMeta)
	}
	return roles
}

// ClusterRoleBindings are the default bindings of the default roles.
func ClusterRoleBindings() []rbacv1.ClusterRoleBinding {
	bindings := []rbacv1.ClusterRoleBinding{
		binding("cluster-admin", "system:masters"),
		binding("system:discovery", "system:authenticated"),
		binding("system:basic-user", "system:authenticated"),
		binding("system:monitoring", "system:monitoring"),
		binding("system:public-info-viewer", "system:authenticated", "system:unauthenticated"),
		binding("system:service-account-issuer-discovery", "system:serviceaccounts"),
	}
	for i := range bindings {
		mark(&bindings[i].ObjectMeta)
	}
	return bindings
}

// binding binds the cluster role of the same name to groups.
func binding(role string, groups ...string) rbacv1.ClusterRoleBinding {
	b := rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacGroup, Kind: "ClusterRole", Name: role},
	}
	for _, g := range groups {
		b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacGroup, Name: g})
	}
	return b
}

func mark(m *metav1.ObjectMeta) {
	if m.Labels == nil {
		m.Labels = map[string]string{}
	}
	for k, v := range Label {
		m.Labels[k] = v
	}
	m.Annotations = map[string]string{}
	for k, v := range Annotation {
		m.Annotations[k] = v
	}
}
