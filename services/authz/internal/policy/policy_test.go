package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/services/authz/internal/authorizer"
)

// namespaceMap is the namespaces a test knows.
type namespaceMap map[string]*corev1.Namespace

func (m namespaceMap) Namespace(name string) (*corev1.Namespace, bool) {
	ns, ok := m[name]
	return ns, ok
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func resourceSpec(user, verb, group, resource, namespace, name string) *authorizationv1.SubjectAccessReviewSpec {
	return &authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Namespace: namespace, Name: name,
		},
	}
}

func readExample(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "policies", "protect-namespaces.rego"))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func newAuthorizer(t *testing.T, opts ...Option) *Authorizer {
	t.Helper()
	a, err := New(context.Background(), namespaceMap{
		"prod":    namespace("prod", map[string]string{"protected": "true"}),
		"scratch": namespace("scratch", nil),
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestProtectNamespaces runs the shipped example policy.
func TestProtectNamespaces(t *testing.T) {
	a := newAuthorizer(t)
	if err := a.SetSource(context.Background(), "test", map[string]string{"protect.rego": readExample(t)}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		spec   *authorizationv1.SubjectAccessReviewSpec
		want   authorizer.Decision
		reason string
	}{
		{"delete protected", resourceSpec("alice", "delete", "", "namespaces", "", "prod"), authorizer.Deny, `namespace "prod" is protected`},
		{"delete protected, namespace set too", resourceSpec("alice", "delete", "", "namespaces", "prod", "prod"), authorizer.Deny, `namespace "prod" is protected`},
		{"delete unprotected", resourceSpec("alice", "delete", "", "namespaces", "", "scratch"), authorizer.NoOpinion, ""},
		{"delete unknown", resourceSpec("alice", "delete", "", "namespaces", "", "ghost"), authorizer.NoOpinion, ""},
		{"get protected", resourceSpec("alice", "get", "", "namespaces", "", "prod"), authorizer.NoOpinion, ""},
		{"delete a pod in protected", resourceSpec("alice", "delete", "", "pods", "prod", "p"), authorizer.NoOpinion, ""},
		{"other group's namespaces", resourceSpec("alice", "delete", "example.com", "namespaces", "", "prod"), authorizer.NoOpinion, ""},
		{"non-resource", &authorizationv1.SubjectAccessReviewSpec{User: "alice", NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/healthz", Verb: "get"}}, authorizer.NoOpinion, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, reason, err := a.Authorize(context.Background(), c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if d != c.want || reason != c.reason {
				t.Errorf("got %v %q, want %v %q", d, reason, c.want, c.reason)
			}
		})
	}
}

// TestContract checks the mode's side of the contract: what the rules
// decide, the input and the packages. The engine's own (compiling, merging
// sets, the last good set, the directory) is tested in libs/regopolicy.
func TestContract(t *testing.T) {
	cases := []struct {
		name    string
		modules map[string]string
		spec    *authorizationv1.SubjectAccessReviewSpec
		want    authorizer.Decision
		reason  string
		compile string
	}{
		{"allow by user", map[string]string{"a.rego": "package kplane.authz.a\nallow if input.user == \"root\""},
			resourceSpec("root", "get", "", "pods", "x", ""), authorizer.Allow, "Rego: allowed by kplane.authz.a", ""},
		{"allow false: no opinion", map[string]string{"a.rego": "package kplane.authz.a\nallow if input.user == \"root\""},
			resourceSpec("bob", "get", "", "pods", "x", ""), authorizer.NoOpinion, "", ""},
		{"deny wins over allow", map[string]string{
			"a.rego": "package kplane.authz.a\nallow := true",
			"b.rego": "package kplane.authz.b.c\ndeny contains \"no\" if input.resourceAttributes.verb == \"delete\"\ndeny contains \"never\" if true",
		}, resourceSpec("bob", "delete", "", "pods", "x", "p"), authorizer.Deny, "never, no", ""},
		{"namespace labels of the request's namespace", map[string]string{"a.rego": "package kplane.authz.a\ndeny contains input.namespace.name if input.namespace.labels.protected == \"true\""},
			resourceSpec("bob", "get", "", "pods", "prod", "p"), authorizer.Deny, "prod", ""},
		{"helpers only", map[string]string{"a.rego": "package kplane.authz.a\nhelper := 1"},
			resourceSpec("bob", "get", "", "pods", "prod", "p"), authorizer.NoOpinion, "", ""},
		{"outside kplane.authz", map[string]string{"a.rego": "package other\ndeny contains \"x\" if true"},
			nil, 0, "", "not under kplane.authz"},
		{"kplane.authz itself", map[string]string{"a.rego": "package kplane.authz\ndeny contains \"x\" if true"},
			nil, 0, "", "not under kplane.authz"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := newAuthorizer(t)
			err := a.SetSource(context.Background(), "test", c.modules)
			if c.compile != "" {
				if err == nil || !strings.Contains(err.Error(), c.compile) {
					t.Fatalf("compile error %v, want one with %q", err, c.compile)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			d, reason, err := a.Authorize(context.Background(), c.spec)
			if err != nil {
				t.Fatal(err)
			}
			if d != c.want || reason != c.reason {
				t.Errorf("got %v %q, want %v %q", d, reason, c.want, c.reason)
			}
		})
	}
}

// failingPolicy fails at evaluation for requests on the object named
// "probe" only: two values for one complete rule.
const failingPolicy = `package kplane.authz.failing

probe := "a" if {
	input.resourceAttributes.name == "probe"
}

probe := "b" if {
	input.resourceAttributes.name == "probe"
}

deny contains "never" if {
	probe == "c"
}
`

// TestEvaluationFailure: a policy that fails at evaluation denies the
// request it fails on, the error as the reason, and nothing else; with
// WithFailOpen it has no opinion.
func TestEvaluationFailure(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []Option
		want authorizer.Decision
	}{
		{"fail closed", nil, authorizer.Deny},
		{"fail open", []Option{WithFailOpen()}, authorizer.NoOpinion},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := newAuthorizer(t, c.opts...)
			if err := a.SetSource(context.Background(), "test", map[string]string{"failing.rego": failingPolicy}); err != nil {
				t.Fatal(err)
			}
			d, reason, err := a.Authorize(context.Background(), resourceSpec("alice", "get", "", "configmaps", "scratch", "probe"))
			if d != c.want || err == nil || !strings.Contains(err.Error(), "conflict") {
				t.Errorf("the failing request: %v %q %v, want %v with the evaluation error", d, reason, err, c.want)
			}
			if c.want == authorizer.Deny && !strings.Contains(reason, "conflict") {
				t.Errorf("the denial's reason %q does not say why", reason)
			}
			d, reason, err = a.Authorize(context.Background(), resourceSpec("alice", "get", "", "configmaps", "scratch", "other"))
			if d != authorizer.NoOpinion || err != nil {
				t.Errorf("a request the policy does not fail on: %v %q %v, want no opinion", d, reason, err)
			}
		})
	}
}

// TestOnChange: a new set in force is reported as policy/<source>, the
// reason the invalidation carries; a set that does not compile is not.
func TestOnChange(t *testing.T) {
	var got []string
	a := newAuthorizer(t, WithOnChange(func(reason string) { got = append(got, reason) }))
	if err := a.SetSource(context.Background(), "configmaps", map[string]string{"p.rego": readExample(t)}); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSource(context.Background(), "dir", map[string]string{"q.rego": "package kplane.authz.q\ndeny contains if"}); err == nil {
		t.Fatal("a broken policy compiled")
	}
	if len(got) != 1 || got[0] != "policy/configmaps" {
		t.Errorf("changes %q, want [policy/configmaps]", got)
	}
}
