package policy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

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
		{"syntax error", map[string]string{"a.rego": "package kplane.authz.a\ndeny contains if"},
			nil, 0, "", "a.rego"},
		{"v0 syntax", map[string]string{"a.rego": "package kplane.authz.a\ndeny[msg] { msg := \"x\" }"},
			nil, 0, "", "a.rego"},
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

// changes records what the authorizer reports as changed.
type changes struct {
	mu  sync.Mutex
	got []string
}

func (c *changes) add(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, reason)
}

func (c *changes) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

// TestWatchDir edits a policy directory under a running watcher: a new
// file takes effect, a broken edit keeps the last good set, the fix takes
// effect, and removing the file lifts the policy.
func TestWatchDir(t *testing.T) {
	dir := t.TempDir()
	var seen changes
	a := newAuthorizer(t, WithOnChange(seen.add))
	d := NewDir(a, dir)
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, 10*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	deleteProd := resourceSpec("alice", "delete", "", "namespaces", "", "prod")
	getPod := resourceSpec("alice", "get", "", "pods", "scratch", "p")
	file := filepath.Join(dir, "protect.rego")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, spec *authorizationv1.SubjectAccessReviewSpec, want authorizer.Decision) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			d, _, err := a.Authorize(context.Background(), spec)
			if err != nil {
				t.Fatal(err)
			}
			if d == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: decision %v, want %v", what, d, want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	waitFor("empty directory", deleteProd, authorizer.NoOpinion)
	write(readExample(t))
	waitFor("policy added", deleteProd, authorizer.Deny)

	before := seen.count()
	write(readExample(t) + "\ndeny contains \"broken\" if {")
	// The broken file is read within a few polls; the last good set stays.
	time.Sleep(100 * time.Millisecond)
	if seen.count() != before {
		t.Fatalf("a broken policy was put in force")
	}
	waitFor("broken edit keeps the last good set", deleteProd, authorizer.Deny)
	waitFor("broken edit does not deny more", getPod, authorizer.NoOpinion)

	write(readExample(t) + "\ndeny contains \"pods are off\" if input.resourceAttributes.resource == \"pods\"\n")
	waitFor("fixed edit", getPod, authorizer.Deny)

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	waitFor("file removed", deleteProd, authorizer.NoOpinion)
}

// TestDirLoadBroken fails the start on a directory whose policies do not
// compile.
func TestDirLoadBroken(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.rego"), []byte("package kplane.authz.bad\ndeny contains if"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewDir(newAuthorizer(t), dir).Load(context.Background()); err == nil || !strings.Contains(err.Error(), "bad.rego") {
		t.Fatalf("load error %v, want one naming bad.rego", err)
	}
	if err := NewDir(newAuthorizer(t), filepath.Join(dir, "missing")).Load(context.Background()); err == nil {
		t.Fatal("a missing directory loaded")
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
