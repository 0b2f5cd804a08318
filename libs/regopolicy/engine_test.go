package regopolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// testRules are the rules the tests' policies are read for.
var testRules = []Rule{{Name: "deny", Kind: Messages}, {Name: "allow", Kind: Boolean}}

func newEngine(t *testing.T, opts ...Option) *Engine {
	t.Helper()
	e, err := New(context.Background(), "kplane.test", testRules, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestContract(t *testing.T) {
	cases := []struct {
		name     string
		opts     []Option
		modules  map[string]string
		input    map[string]any
		denies   []string
		allowers []string
		compile  string
	}{
		{"deny merges every package's set, sorted, without duplicates", nil, map[string]string{
			"a.rego": "package kplane.test.a\ndeny contains \"no\" if input.verb == \"delete\"\ndeny contains \"never\" if true",
			"b.rego": "package kplane.test.b.c\ndeny contains \"no\" if true\ndeny contains \"also\" if true",
		}, map[string]any{"verb": "delete"}, []string{"also", "never", "no"}, nil, ""},
		{"deny reads the input", nil, map[string]string{
			"a.rego": "package kplane.test.a\ndeny contains input.verb if input.verb == \"delete\"",
		}, map[string]any{"verb": "get"}, nil, nil, ""},
		{"allow names the packages where it is true", nil, map[string]string{
			"a.rego": "package kplane.test.a\nallow if input.user == \"root\"",
			"b.rego": "package kplane.test.b\nallow := true",
			"c.rego": "package kplane.test.c\nallow := false",
		}, map[string]any{"user": "root"}, nil, []string{"kplane.test.a", "kplane.test.b"}, ""},
		{"modules of one package merge their sets", nil, map[string]string{
			"a.rego": "package kplane.test.p\ndeny contains \"a\" if true",
			"b.rego": "package kplane.test.p\ndeny contains \"b\" if true",
		}, nil, []string{"a", "b"}, nil, ""},
		{"the root package where allowed", []Option{WithRootPackage()}, map[string]string{
			"a.rego": "package kplane.test\ndeny contains \"root\" if true",
			"b.rego": "package kplane.test.b\ndeny contains \"under\" if true",
		}, nil, []string{"root", "under"}, nil, ""},
		{"the root package where not allowed", nil, map[string]string{"a.rego": "package kplane.test\ndeny contains \"x\" if true"},
			nil, nil, nil, "a.rego: package kplane.test is not under kplane.test"},
		{"outside the root", nil, map[string]string{"a.rego": "package other\ndeny contains \"x\" if true"},
			nil, nil, nil, "not under kplane.test"},
		{"outside the root where the root is allowed", []Option{WithRootPackage()}, map[string]string{"a.rego": "package kplane.testing\ndeny contains \"x\" if true"},
			nil, nil, nil, "package kplane.testing is neither kplane.test nor under it"},
		{"syntax error", nil, map[string]string{"a.rego": "package kplane.test.a\ndeny contains if"},
			nil, nil, nil, "a.rego"},
		{"v0 syntax", nil, map[string]string{"a.rego": "package kplane.test.a\ndeny[msg] { msg := \"x\" }"},
			nil, nil, nil, "a.rego"},
		{"type error", nil, map[string]string{"a.rego": "package kplane.test.a\ndeny contains x if x := 1 + \"a\""},
			nil, nil, nil, "a.rego"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t, c.opts...)
			err := e.SetSource(context.Background(), "test", c.modules)
			if c.compile != "" {
				if err == nil || !strings.Contains(err.Error(), c.compile) {
					t.Fatalf("compile error %v, want one with %q", err, c.compile)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			res, err := e.Current().Eval(context.Background(), c.input)
			if err != nil {
				t.Fatal(err)
			}
			if got := res.Messages("deny"); !slices.Equal(got, c.denies) {
				t.Errorf("deny %q, want %q", got, c.denies)
			}
			if got := res.Packages("allow"); !slices.Equal(got, c.allowers) {
				t.Errorf("allowed by %q, want %q", got, c.allowers)
			}
		})
	}
}

// TestEmpty: a set whose modules define none of the rules read is empty,
// and says which rules are defined.
func TestEmpty(t *testing.T) {
	e := newEngine(t)
	if !e.Current().Empty() {
		t.Fatal("a new engine's set is not empty")
	}
	if err := e.SetSource(context.Background(), "test", map[string]string{"a.rego": "package kplane.test.a\nhelper := 1"}); err != nil {
		t.Fatal(err)
	}
	if !e.Current().Empty() || e.Current().Modules() != 1 {
		t.Errorf("helpers only: empty %v, %d modules; want empty, 1 module", e.Current().Empty(), e.Current().Modules())
	}
	if err := e.SetSource(context.Background(), "test", map[string]string{"a.rego": "package kplane.test.a\ndeny contains \"x\" if false"}); err != nil {
		t.Fatal(err)
	}
	s := e.Current()
	if s.Empty() || !s.Defines("deny") || s.Defines("allow") {
		t.Errorf("deny only: empty %v, defines deny %v, allow %v", s.Empty(), s.Defines("deny"), s.Defines("allow"))
	}
}

// TestNotStrings: a message that is not a string fails the evaluation.
func TestNotStrings(t *testing.T) {
	e := newEngine(t)
	if err := e.SetSource(context.Background(), "test", map[string]string{"a.rego": "package kplane.test.a\ndeny contains 42 if true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Current().Eval(context.Background(), nil); err == nil || !strings.Contains(err.Error(), "kplane.test.a.deny holds") {
		t.Fatalf("error %v, want one naming kplane.test.a.deny", err)
	}
}

// TestLastGoodSet: a change that does not compile keeps the set in force,
// is not reported as a change, counts as a failure, and is compiled again
// with the next change of any source.
func TestLastGoodSet(t *testing.T) {
	reg := prometheus.NewRegistry()
	var changed []string
	e := newEngine(t, WithMetrics(reg, "test"), WithOnChange(func(s string) { changed = append(changed, s) }))
	ctx := context.Background()
	deny := func() []string {
		t.Helper()
		res, err := e.Current().Eval(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res.Messages("deny")
	}
	if err := e.SetSource(ctx, "a", map[string]string{"a/p.rego": "package kplane.test.a\ndeny contains \"good\" if true"}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSource(ctx, "b", map[string]string{"b/p.rego": "package kplane.test.b\ndeny contains if"}); err == nil {
		t.Fatal("a broken module compiled")
	}
	if got := deny(); !slices.Equal(got, []string{"good"}) {
		t.Errorf("after a broken change: deny %q, want the last good set's", got)
	}
	if !slices.Equal(changed, []string{"a"}) {
		t.Errorf("changes reported %q, want only a", changed)
	}
	// Another source's change compiles the broken module again.
	if err := e.SetSource(ctx, "a", map[string]string{"a/p.rego": "package kplane.test.a\ndeny contains \"better\" if true"}); err == nil {
		t.Fatal("a's change compiled with b still broken")
	}
	if err := e.SetSource(ctx, "b", map[string]string{"b/p.rego": "package kplane.test.b\ndeny contains \"fixed\" if true"}); err != nil {
		t.Fatal(err)
	}
	if got := deny(); !slices.Equal(got, []string{"better", "fixed"}) {
		t.Errorf("after the fix: deny %q, want both sources' latest", got)
	}
	// An unchanged source compiles nothing.
	if err := e.SetSource(ctx, "b", map[string]string{"b/p.rego": "package kplane.test.b\ndeny contains \"fixed\" if true"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(changed, []string{"a", "b"}) {
		t.Errorf("changes reported %q, want a then b", changed)
	}
	want := `
# HELP kplane_test_policy_reloads_total Changes of the Rego policies, by result: success (in force) or failure (did not compile; the last good set stays).
# TYPE kplane_test_policy_reloads_total counter
kplane_test_policy_reloads_total{result="failure"} 2
kplane_test_policy_reloads_total{result="success"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kplane_test_policy_reloads_total"); err != nil {
		t.Error(err)
	}
}

func TestReadsInput(t *testing.T) {
	name := []string{"resourceAttributes", "name"}
	cases := []struct {
		desc   string
		module string
		want   bool
	}{
		{"the path", `deny contains "x" if input.resourceAttributes.name == "a"`, true},
		{"another key", `deny contains "x" if input.resourceAttributes.verb == "delete"`, false},
		{"another document", `deny contains "x" if input.namespace.labels.protected == "true"`, false},
		{"a document containing it", `deny contains "x" if count(input.resourceAttributes) > 7`, true},
		{"a computed key", `deny contains "x" if { some k; input.resourceAttributes[k] == "a" }`, true},
		{"a computed key above it", `deny contains "x" if { some k; input[k].name == "a" }`, true},
		{"input as a value", `deny contains "x" if { x := input; x.resourceAttributes.name == "a" }`, true},
		{"input in a call", `deny contains "x" if object.get(input, ["resourceAttributes", "name"], "") == "a"`, true},
		{"an import of a document containing it", "import input.resourceAttributes as ra\n" + `deny contains "x" if ra.name == "a"`, true},
		{"an import of another document", "import input.namespace as ns\n" + `deny contains "x" if ns.name == "a"`, false},
		{"no input", `deny contains "x" if false`, false},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			e := newEngine(t)
			if err := e.SetSource(context.Background(), "test", map[string]string{"a.rego": "package kplane.test.a\n" + c.module}); err != nil {
				t.Fatal(err)
			}
			if got := e.Current().ReadsInput(name...); got != c.want {
				t.Fatalf("ReadsInput(%v) = %v, want %v", name, got, c.want)
			}
		})
	}
}
