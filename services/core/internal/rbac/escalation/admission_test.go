package escalation_test

import (
	"context"
	"net/http"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/proto/authz"
	"kplane.dev/services/core/internal/coretest"
)

func rule(verbs []string, resource string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{Verbs: verbs, APIGroups: []string{""}, Resources: []string{resource}}
}

// permission is what the fake authz allows: user may verb resource/name.
type permission struct{ user, verb, resource, name string }

// serveAuthz answers as authz would with a trivial policy: everyone
// holds get on configmaps in ns1 and nothing else, and the named
// permissions are allowed to SubjectAccessReviews.
func serveAuthz(t *testing.T, c *coretest.Cluster, allowed ...permission) {
	coretest.Answer(t, c, authz.SubjectAccessReview, func(in *authorizationv1.SubjectAccessReview) (any, error) {
		if ra := in.Spec.ResourceAttributes; ra != nil {
			for _, p := range allowed {
				if p == (permission{in.Spec.User, ra.Verb, ra.Resource, ra.Name}) {
					in.Status.Allowed = true
				}
			}
		}
		return in, nil
	})
	coretest.Answer(t, c, authz.SubjectRulesReview, func(in *authz.RulesReview) (any, error) {
		var s authorizationv1.SubjectRulesReviewStatus
		if in.Namespace == "ns1" {
			s.ResourceRules = []authorizationv1.ResourceRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps"}}}
		}
		return s, nil
	})
}

func TestEscalation(t *testing.T) {
	c := coretest.Start(t, coretest.Options{NATS: true})
	serveAuthz(t, c,
		// A create names no object: escalate on any cluster role.
		permission{"carol", "escalate", "clusterroles", ""},
		permission{"bob", "escalate", "roles", "open"},
		permission{"dave", "bind", "clusterroles", "secret-reader"},
	)
	ctx := context.Background()
	as := func(name string) *kubernetes.Clientset {
		cs, err := kubernetes.NewForConfig(c.Replicas[0].As(t, frontproxy.User{Name: name, Groups: []string{"system:authenticated"}}))
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	admin, err := kubernetes.NewForConfig(c.Replicas[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, nsObject("ns1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// system:masters grants anything, whatever authz says.
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"}, Rules: []rbacv1.PolicyRule{rule([]string{"get"}, "secrets")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bob, carol, dave := as("bob"), as("carol"), as("dave")
	role := func(name string, rules ...rbacv1.PolicyRule) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	}
	binding := func(name, kind, ref string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: ref},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "eve"}},
		}
	}
	const notHeld = `user "bob" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n"

	cases := []struct {
		name  string
		write func() error
		// message is the 403's; empty means the write is allowed.
		message string
	}{
		{name: "role within held rules", write: func() error {
			_, err := bob.RbacV1().Roles("ns1").Create(ctx, role("cm-reader", rule([]string{"get"}, "configmaps")), metav1.CreateOptions{})
			return err
		}},
		{name: "role beyond held rules", write: func() error {
			_, err := bob.RbacV1().Roles("ns1").Create(ctx, role("sneaky", rule([]string{"get"}, "secrets")), metav1.CreateOptions{})
			return err
		}, message: `roles.rbac.authorization.k8s.io "sneaky" is forbidden: ` + notHeld + `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{name: "missing rules compacted and sorted", write: func() error {
			_, err := bob.RbacV1().Roles("ns1").Create(ctx, role("many", rule([]string{"get", "list"}, "secrets"), rule([]string{"get", "create"}, "configmaps")), metav1.CreateOptions{})
			return err
		}, message: `roles.rbac.authorization.k8s.io "many" is forbidden: ` + notHeld +
			`{APIGroups:[""], Resources:["configmaps"], Verbs:["create"]}` + "\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["get" "list"]}`},
		{name: "cluster role needs cluster-wide rules", write: func() error {
			_, err := bob.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wide"}, Rules: []rbacv1.PolicyRule{rule([]string{"get"}, "configmaps")}}, metav1.CreateOptions{})
			return err
		}, message: `clusterroles.rbac.authorization.k8s.io "wide" is forbidden: ` + notHeld + `{APIGroups:[""], Resources:["configmaps"], Verbs:["get"]}`},
		{name: "escalate verb", write: func() error {
			_, err := carol.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "wide"}, Rules: []rbacv1.PolicyRule{rule([]string{"*"}, "secrets")}}, metav1.CreateOptions{})
			return err
		}},
		{name: "aggregation rule needs everything", write: func() error {
			_, err := bob.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{
				ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"x": "y"}}},
			}}, metav1.CreateOptions{})
			return err
		}, message: `clusterroles.rbac.authorization.k8s.io "agg" is forbidden: must have cluster-admin privileges to use the aggregationRule`},
		{name: "update beyond held rules", write: func() error {
			r, err := bob.RbacV1().Roles("ns1").Get(ctx, "cm-reader", metav1.GetOptions{})
			if err != nil {
				return err
			}
			r.Rules = append(r.Rules, rule([]string{"delete"}, "configmaps"))
			_, err = bob.RbacV1().Roles("ns1").Update(ctx, r, metav1.UpdateOptions{})
			return err
		}, message: `roles.rbac.authorization.k8s.io "cm-reader" is forbidden: ` + notHeld + `{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}`},
		{name: "escalate verb on one role", write: func() error {
			r, err := bob.RbacV1().Roles("ns1").Create(ctx, role("open", rule([]string{"get"}, "configmaps")), metav1.CreateOptions{})
			if err != nil {
				return err
			}
			r.Rules = append(r.Rules, rule([]string{"list"}, "secrets"))
			_, err = bob.RbacV1().Roles("ns1").Update(ctx, r, metav1.UpdateOptions{})
			return err
		}},
		{name: "escalate verb on one role does not cover creates", write: func() error {
			_, err := bob.RbacV1().Roles("ns1").Create(ctx, role("open-2", rule([]string{"list"}, "secrets")), metav1.CreateOptions{})
			return err
		}, message: `roles.rbac.authorization.k8s.io "open-2" is forbidden: ` + notHeld + `{APIGroups:[""], Resources:["secrets"], Verbs:["list"]}`},
		{name: "binding of held role", write: func() error {
			_, err := bob.RbacV1().RoleBindings("ns1").Create(ctx, binding("cm", "Role", "cm-reader"), metav1.CreateOptions{})
			return err
		}},
		{name: "binding beyond held rules", write: func() error {
			_, err := bob.RbacV1().RoleBindings("ns1").Create(ctx, binding("secrets", "ClusterRole", "secret-reader"), metav1.CreateOptions{})
			return err
		}, message: `rolebindings.rbac.authorization.k8s.io "secrets" is forbidden: ` + notHeld + `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}`},
		{name: "bind verb", write: func() error {
			_, err := dave.RbacV1().RoleBindings("ns1").Create(ctx, binding("secrets", "ClusterRole", "secret-reader"), metav1.CreateOptions{})
			return err
		}},
		{name: "binding of a missing role", write: func() error {
			_, err := bob.RbacV1().RoleBindings("ns1").Create(ctx, binding("ghost", "Role", "missing"), metav1.CreateOptions{})
			return err
		}, message: `rolebindings.rbac.authorization.k8s.io "ghost" is forbidden: roles.rbac.authorization.k8s.io "missing" not found`},
		{name: "cluster binding beyond held rules", write: func() error {
			_, err := dave.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "cluster-secrets"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "wide"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "eve"}},
			}, metav1.CreateOptions{})
			return err
		}, message: `clusterrolebindings.rbac.authorization.k8s.io "cluster-secrets" is forbidden: user "dave" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:` + "\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["*"]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.write()
			if tc.message == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var se *apierrors.StatusError
			if s, ok := err.(*apierrors.StatusError); ok {
				se = s
			}
			if se == nil || se.ErrStatus.Code != http.StatusForbidden || se.ErrStatus.Message != tc.message {
				t.Fatalf("got %v\nwant 403 %q", err, tc.message)
			}
		})
	}
}

func nsObject(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}
