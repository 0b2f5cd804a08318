package rbac

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
)

// messages renders errors as kubectl shows them in an Invalid status.
func messages(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return out
}

func checkCreate(t *testing.T, s resource.Strategy, obj runtime.Object, want []string) {
	t.Helper()
	ctx := context.Background()
	s.PrepareForCreate(ctx, obj)
	if diff := cmp.Diff(want, messages(s.Validate(ctx, obj))); diff != "" {
		t.Errorf("create errors (-want +got):\n%s", diff)
	}
}

func checkUpdate(t *testing.T, s resource.Strategy, obj, old runtime.Object, want []string) {
	t.Helper()
	ctx := context.Background()
	s.PrepareForCreate(ctx, old)
	s.PrepareForUpdate(ctx, obj, old)
	if diff := cmp.Diff(want, messages(s.ValidateUpdate(ctx, obj, old))); diff != "" {
		t.Errorf("update errors (-want +got):\n%s", diff)
	}
}

func TestRole(t *testing.T) {
	valid := func() *rbacv1.Role {
		return &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "reader", Namespace: "default"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods"}}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*rbacv1.Role)
		want   []string
	}{
		{name: "valid", mutate: func(*rbacv1.Role) {}},
		{name: "no rules", mutate: func(r *rbacv1.Role) { r.Rules = nil }},
		{
			name:   "no verbs",
			mutate: func(r *rbacv1.Role) { r.Rules[0].Verbs = nil },
			want:   []string{"rules[0].verbs: Required value: verbs must contain at least one value"},
		},
		{
			name:   "no api groups",
			mutate: func(r *rbacv1.Role) { r.Rules[0].APIGroups = nil },
			want:   []string{"rules[0].apiGroups: Required value: resource rules must supply at least one api group"},
		},
		{
			name:   "no resources",
			mutate: func(r *rbacv1.Role) { r.Rules[0].Resources = nil },
			want:   []string{"rules[0].resources: Required value: resource rules must supply at least one resource"},
		},
		{
			name: "non-resource urls in a namespaced role",
			mutate: func(r *rbacv1.Role) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}}}
			},
			want: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced rules cannot apply to non-resource URLs`},
		},
		{
			name: "resource names on several resources are allowed",
			mutate: func(r *rbacv1.Role) {
				r.Rules[0].Resources = []string{"pods", "secrets"}
				r.Rules[0].ResourceNames = []string{"a"}
			},
		},
		{
			name: "second rule reported at its index",
			mutate: func(r *rbacv1.Role) {
				r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}})
			},
			want: []string{"rules[1].verbs: Required value: verbs must contain at least one value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.mutate(r)
			checkCreate(t, RoleStrategy(), r, tt.want)
			checkUpdate(t, RoleStrategy(), r, valid(), tt.want)
		})
	}
}

func TestClusterRole(t *testing.T) {
	valid := func() *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "system:reader"},
			Rules:      []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		}
	}
	tests := []struct {
		name   string
		mutate func(*rbacv1.ClusterRole)
		want   []string
	}{
		{name: "valid", mutate: func(*rbacv1.ClusterRole) {}},
		{
			name: "non-resource urls",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/version/*"}}}
			},
		},
		{
			// Kube's server accepts URLs without a leading slash; only
			// kubectl create clusterrole checks it on the client.
			name: "non-resource url without a slash is accepted",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"healthz"}}}
			},
		},
		{
			name: "non-resource urls with resources",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, Resources: []string{"pods"}}}
			},
			want: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs`},
		},
		{
			name: "non-resource urls with api groups",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, APIGroups: []string{""}}}
			},
			want: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs`},
		},
		{
			name: "non-resource urls with resource names",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz"}, ResourceNames: []string{"x"}}}
			},
			want: []string{`rules[0].nonResourceURLs: Invalid value: ["/healthz"]: rules cannot apply to both regular resources and non-resource URLs`},
		},
		{
			name: "non-resource urls without verbs",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = []rbacv1.PolicyRule{{NonResourceURLs: []string{"/healthz"}}}
			},
			want: []string{"rules[0].verbs: Required value: verbs must contain at least one value"},
		},
		{
			name: "aggregation rule",
			mutate: func(r *rbacv1.ClusterRole) {
				r.Rules = nil
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
					{MatchLabels: map[string]string{"rbac.example.com/aggregate-to-view": "true"}},
				}}
			},
		},
		{
			name: "aggregation rule without selectors",
			mutate: func(r *rbacv1.ClusterRole) {
				r.AggregationRule = &rbacv1.AggregationRule{}
			},
			want: []string{"aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"},
		},
		{
			name: "aggregation rule with a bad label key",
			mutate: func(r *rbacv1.ClusterRole) {
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
					{MatchLabels: map[string]string{"bad key": "true"}},
				}}
			},
			want: []string{
				`aggregationRule.clusterRoleSelectors[0].matchLabels: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
				`aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.`,
			},
		},
		{
			name: "aggregation rule with an unknown operator",
			mutate: func(r *rbacv1.ClusterRole) {
				r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
					{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near", Values: []string{"b"}}}},
				}}
			},
			want: []string{
				`aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator: Invalid value: "Near": not a valid selector operator`,
				`aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector.`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.mutate(r)
			checkCreate(t, ClusterRoleStrategy(), r, tt.want)
		})
	}
}

// Kube relaxes the label value check of an aggregation selector whose
// stored version already broke it, but still parses the selector, which
// checks values again: the relaxation removes only the detailed error.
func TestClusterRoleUpdateWithInvalidLabelValues(t *testing.T) {
	role := func(value string) *rbacv1.ClusterRole {
		return &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "aggregate"},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: metav1.LabelSelectorOpIn, Values: []string{value}}}},
			}},
		}
	}
	invalid := `aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values[0]: Invalid value: "-bad-": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`
	unparsable := "aggregationRule.clusterRoleSelectors[0]: Invalid value: null: invalid label selector."
	tests := []struct {
		name     string
		obj, old *rbacv1.ClusterRole
		want     []string
	}{
		{name: "old already invalid", obj: role("-bad-"), old: role("-bad-"), want: []string{unparsable}},
		{name: "old valid", obj: role("-bad-"), old: role("good"), want: []string{invalid, unparsable}},
		{name: "fixed", obj: role("good"), old: role("-bad-")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUpdate(t, ClusterRoleStrategy(), tt.obj, tt.old, tt.want)
		})
	}
	t.Run("create", func(t *testing.T) {
		checkCreate(t, ClusterRoleStrategy(), role("-bad-"), []string{invalid, unparsable})
	})
}

func TestRoleBinding(t *testing.T) {
	valid := func() *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "read", Namespace: "default"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
			Subjects: []rbacv1.Subject{
				{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"},
				{Kind: "ServiceAccount", Name: "default"},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(*rbacv1.RoleBinding)
		want   []string
	}{
		{name: "valid", mutate: func(*rbacv1.RoleBinding) {}},
		{name: "cluster role", mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "ClusterRole" }},
		{name: "no subjects", mutate: func(b *rbacv1.RoleBinding) { b.Subjects = nil }},
		{
			name:   "service account without namespace is the binding's",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", Name: "builder"}} },
		},
		{
			name:   "role ref api group",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.APIGroup = "example.com" },
			want:   []string{`roleRef.apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`},
		},
		{
			name:   "role ref kind",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Kind = "Secret" },
			want:   []string{`roleRef.kind: Unsupported value: "Secret": supported values: "Role", "ClusterRole"`},
		},
		{
			name:   "role ref name missing",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "" },
			want:   []string{"roleRef.name: Required value"},
		},
		{
			name:   "role ref name with a slash",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "a/b" },
			want:   []string{`roleRef.name: Invalid value: "a/b": may not contain '/'`},
		},
		{
			name:   "role ref name dot dot",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = ".." },
			want:   []string{`roleRef.name: Invalid value: "..": may not be '..'`},
		},
		{
			name:   "role ref name with a percent",
			mutate: func(b *rbacv1.RoleBinding) { b.RoleRef.Name = "a%b" },
			want:   []string{`roleRef.name: Invalid value: "a%b": may not contain '%'`},
		},
		{
			name:   "subject kind",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].Kind = "Robot" },
			want:   []string{`subjects[0].kind: Unsupported value: "Robot": supported values: "ServiceAccount", "User", "Group"`},
		},
		{
			name:   "subject name missing",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "" },
			want:   []string{"subjects[0].name: Required value"},
		},
		{
			name:   "user in another api group",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].APIGroup = "example.com" },
			want:   []string{`subjects[0].apiGroup: Unsupported value: "example.com": supported values: "rbac.authorization.k8s.io"`},
		},
		{
			name: "group in another api group",
			mutate: func(b *rbacv1.RoleBinding) {
				b.Subjects[0] = rbacv1.Subject{Kind: "Group", APIGroup: "v1", Name: "devs"}
			},
			want: []string{`subjects[0].apiGroup: Unsupported value: "v1": supported values: "rbac.authorization.k8s.io"`},
		},
		{
			name:   "user names are free form",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[0].Name = "system:serviceaccount:ns:Name With Spaces" },
		},
		{
			name:   "service account in an api group",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].APIGroup = rbacv1.GroupName },
			want:   []string{`subjects[1].apiGroup: Unsupported value: "rbac.authorization.k8s.io": supported values: ""`},
		},
		{
			name:   "service account name not a DNS subdomain",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].Name = "Builder" },
			want:   []string{`subjects[1].name: Invalid value: "Builder": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`},
		},
		{
			name:   "service account name missing",
			mutate: func(b *rbacv1.RoleBinding) { b.Subjects[1].Name = "" },
			want:   []string{"subjects[1].name: Required value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := valid()
			tt.mutate(b)
			checkCreate(t, RoleBindingStrategy(), b, tt.want)
		})
	}
}

func TestClusterRoleBinding(t *testing.T) {
	valid := func() *rbacv1.ClusterRoleBinding {
		return &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "system:read"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
			Subjects: []rbacv1.Subject{
				{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "system:authenticated"},
				{Kind: "ServiceAccount", Name: "default", Namespace: "kube-system"},
			},
		}
	}
	tests := []struct {
		name   string
		mutate func(*rbacv1.ClusterRoleBinding)
		want   []string
	}{
		{name: "valid", mutate: func(*rbacv1.ClusterRoleBinding) {}},
		{
			name:   "role ref to a role",
			mutate: func(b *rbacv1.ClusterRoleBinding) { b.RoleRef.Kind = "Role" },
			want:   []string{`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`},
		},
		{
			name:   "service account without namespace",
			mutate: func(b *rbacv1.ClusterRoleBinding) { b.Subjects[1].Namespace = "" },
			want:   []string{"subjects[1].namespace: Required value"},
		},
		{
			name: "every error at once",
			mutate: func(b *rbacv1.ClusterRoleBinding) {
				b.RoleRef = rbacv1.RoleRef{APIGroup: "x", Kind: "Role"}
				b.Subjects = []rbacv1.Subject{{Kind: "ServiceAccount", APIGroup: "y"}}
			},
			want: []string{
				`roleRef.apiGroup: Unsupported value: "x": supported values: "rbac.authorization.k8s.io"`,
				`roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"`,
				"roleRef.name: Required value",
				"subjects[0].name: Required value",
				`subjects[0].apiGroup: Unsupported value: "y": supported values: ""`,
				"subjects[0].namespace: Required value",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := valid()
			tt.mutate(b)
			checkCreate(t, ClusterRoleBindingStrategy(), b, tt.want)
		})
	}
}

func TestBindingRoleRefIsImmutable(t *testing.T) {
	t.Run("role binding", func(t *testing.T) {
		old := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
			RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "a"},
		}
		same := old.DeepCopy()
		same.Subjects = []rbacv1.Subject{{Kind: "User", Name: "bob"}}
		checkUpdate(t, RoleBindingStrategy(), same, old.DeepCopy(), nil)

		changed := old.DeepCopy()
		changed.RoleRef.Name = "b"
		checkUpdate(t, RoleBindingStrategy(), changed, old.DeepCopy(), []string{
			`roleRef: Invalid value: {"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"b"}: cannot change roleRef`,
		})
	})
	t.Run("cluster role binding", func(t *testing.T) {
		old := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "b"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		}
		changed := old.DeepCopy()
		changed.RoleRef.Name = "edit"
		checkUpdate(t, ClusterRoleBindingStrategy(), changed, old, []string{
			`roleRef: Invalid value: {"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"edit"}: cannot change roleRef`,
		})
	})
}

func TestBindingDefaults(t *testing.T) {
	b := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"},
		RoleRef:    rbacv1.RoleRef{Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", Name: "u"},
			{Kind: "Group", Name: "g"},
			{Kind: "ServiceAccount", Name: "sa"},
			{Kind: "Robot", Name: "r"},
			{Kind: "User", APIGroup: "kept", Name: "u2"},
		},
	}
	RoleBindingStrategy().PrepareForCreate(context.Background(), b)
	want := rbacv1.RoleBinding{
		ObjectMeta: b.ObjectMeta,
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "r"},
		Subjects: []rbacv1.Subject{
			{Kind: "User", APIGroup: rbacv1.GroupName, Name: "u"},
			{Kind: "Group", APIGroup: rbacv1.GroupName, Name: "g"},
			{Kind: "ServiceAccount", Name: "sa"},
			{Kind: "Robot", Name: "r"},
			{Kind: "User", APIGroup: "kept", Name: "u2"},
		},
	}
	if diff := cmp.Diff(want, *b); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "c"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}}
	ClusterRoleBindingStrategy().PrepareForUpdate(context.Background(), crb, crb.DeepCopy())
	if crb.RoleRef.APIGroup != rbacv1.GroupName {
		t.Errorf("roleRef.apiGroup after update = %q, want %q", crb.RoleRef.APIGroup, rbacv1.GroupName)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name   string
		prefix bool
		want   []string
	}{
		{name: "system:controller:foo"},
		{name: "Upper_Case.and spaces"},
		{name: "a/b", want: []string{"may not contain '/'"}},
		{name: "a%b", want: []string{"may not contain '%'"}},
		{name: ".", want: []string{"may not be '.'"}},
		{name: "..", want: []string{"may not be '..'"}},
		{name: ".", prefix: true, want: []string{"may not be '.'"}},
	}
	for _, s := range []resource.Strategy{RoleStrategy(), ClusterRoleStrategy(), RoleBindingStrategy(), ClusterRoleBindingStrategy()} {
		v, ok := s.(rest.NameValidator)
		if !ok {
			t.Fatalf("%T does not validate names", s)
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if diff := cmp.Diff(tt.want, v.ValidateName(tt.name, tt.prefix)); diff != "" {
					t.Errorf("%T.ValidateName(%q) (-want +got):\n%s", s, tt.name, diff)
				}
			})
		}
	}
}

func TestWrongType(t *testing.T) {
	errs := RoleStrategy().Validate(context.Background(), &rbacv1.ClusterRole{})
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeInternal {
		t.Errorf("Validate(ClusterRole) on roles = %v, want one internal error", errs)
	}
}
