package rbac

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Small vocabularies, so that random rules and requests meet often.
var (
	randUsers      = l("u1", "u2", saUser("ns1", "sa1"), saUser("ns2", "sa1"), saUser("ns1", "sa2"))
	randGroups     = l("g1", "g2", "system:serviceaccounts", "system:serviceaccounts:ns1")
	randNamespaces = l("", "ns1", "ns2")
	randVerbs      = l("get", "list", "create", "update", "*")
	randAPIGroups  = l("", "apps", "*")
	randResources  = l("pods", "pods/status", "*/status", "deployments", "*", "pods/log", "status")
	randSubres     = l("", "", "status", "log")
	randNames      = l("", "a", "b")
	randPaths      = l("/healthz", "/healthz/etcd", "/api", "/api/v1", "/apis", "/logs", "/logs/x")
	randURLs       = l("/healthz", "/api*", "/api/*", "*", "/logs", "/logs/*", "/healthz*")
	randRoleNames  = l("r1", "r2", "r3", "r4", "missing")
	randLabels     = l("a", "b")
)

func pick[T any](r *rand.Rand, from []T) T { return from[r.IntN(len(from))] }

func pickSome(r *rand.Rand, from []string, maxN int) []string {
	n := r.IntN(maxN + 1)
	out := make([]string, 0, n)
	for range n {
		out = append(out, pick(r, from))
	}
	return out
}

func randRules(r *rand.Rand) []rbacv1.PolicyRule {
	var rules []rbacv1.PolicyRule
	for range r.IntN(4) + 1 {
		if r.IntN(4) == 0 {
			rules = append(rules, urlRule(pickSome(r, randVerbs, 2), pickSome(r, randURLs, 2)...))
			continue
		}
		var names []string
		if r.IntN(3) == 0 {
			names = pickSome(r, randNames[1:], 2)
		}
		rules = append(rules, rule(pickSome(r, randVerbs, 2), pickSome(r, randAPIGroups, 2), pickSome(r, randResources, 2), names...))
	}
	return rules
}

func randSubjects(r *rand.Rand) []rbacv1.Subject {
	var subjects []rbacv1.Subject
	for range r.IntN(3) + 1 {
		switch r.IntN(3) {
		case 0:
			subjects = append(subjects, user(pick(r, randUsers)))
		case 1:
			subjects = append(subjects, group(pick(r, randGroups)))
		default:
			subjects = append(subjects, sa(pick(r, randNamespaces), pick(r, l("sa1", "sa2"))))
		}
	}
	return subjects
}

func randRef(r *rand.Rand) (kind, name string) {
	return pick(r, l("Role", "ClusterRole", "ClusterRole")), pick(r, randRoleNames)
}

func randWorld(r *rand.Rand) world {
	var w world
	for _, name := range randRoleNames[:4] {
		labels := map[string]string{pick(r, randLabels): "true"}
		if r.IntN(3) == 0 {
			w.clusterRoles = append(w.clusterRoles, aggregatedClusterRole(name, labels,
				metav1.LabelSelector{MatchLabels: map[string]string{pick(r, randLabels): "true"}}))
		} else {
			w.clusterRoles = append(w.clusterRoles, clusterRole(name, labels, randRules(r)...))
		}
		for _, ns := range randNamespaces[1:] {
			if r.IntN(2) == 0 {
				w.roles = append(w.roles, role(ns, name, randRules(r)...))
			}
		}
	}
	for i := range 12 {
		kind, name := randRef(r)
		w.clusterRoleBindings = append(w.clusterRoleBindings, crb(fmt.Sprintf("crb%d", i), kind, name, randSubjects(r)...))
	}
	for i := range 16 {
		kind, name := randRef(r)
		w.roleBindings = append(w.roleBindings, rb(pick(r, randNamespaces[1:]), fmt.Sprintf("rb%d", i), kind, name, randSubjects(r)...))
	}
	return w
}

func randAttributes(r *rand.Rand) Attributes {
	groups := pickSome(r, randGroups, 3)
	if r.IntN(4) == 0 {
		return nonRes(pick(r, randUsers), groups, pick(r, randVerbs[:4]), pick(r, randPaths))
	}
	return res(pick(r, randUsers), groups, pick(r, randVerbs[:4]), pick(r, randAPIGroups[:2]),
		pick(r, l("pods", "deployments", "status")), pick(r, randSubres), pick(r, randNamespaces), pick(r, randNames))
}

// TestRandomAgreesWithReference checks the engine against the reference
// evaluator on seeded random worlds and requests, decision and reason.
func TestRandomAgreesWithReference(t *testing.T) {
	const worlds, requestsPerWorld = 50, 100
	r := rand.New(rand.NewPCG(5, 2026))
	allowed := 0
	for wi := range worlds {
		w := randWorld(r)
		a := newTestAuthorizer(t, w)
		for range requestsPerWorld {
			attrs := randAttributes(r)
			decision, reason, err := a.Authorize(context.Background(), attrs)
			if err != nil {
				t.Fatal(err)
			}
			wantDecision, wantReason := referenceAuthorize(w, attrs)
			if decision != wantDecision || reason != wantReason {
				t.Fatalf("world %d, %+v: engine %v %q, reference %v %q", wi, attrs, decision, reason, wantDecision, wantReason)
			}
			if decision == DecisionAllow {
				allowed++
			}
		}
	}
	// Both outcomes must be common, or the comparison says little.
	if total := worlds * requestsPerWorld; allowed < total/10 || allowed > total*9/10 {
		t.Fatalf("%d of %d random requests allowed: the generator no longer exercises both outcomes", allowed, total)
	}
}

// TestEveryNameHoldsForEveryName checks, on seeded random worlds, that a
// decision said to hold for every name is the one every name gets, and
// that both answers are common.
func TestEveryNameHoldsForEveryName(t *testing.T) {
	const worlds, requestsPerWorld = 50, 100
	r := rand.New(rand.NewPCG(7, 2026))
	every, named := 0, 0
	for wi := range worlds {
		w := randWorld(r)
		a := newTestAuthorizer(t, w)
		for range requestsPerWorld {
			attrs := randAttributes(r)
			if !attrs.ResourceRequest || attrs.Name == "" {
				continue
			}
			named++
			got, err := a.Decide(context.Background(), attrs)
			if err != nil {
				t.Fatal(err)
			}
			if !got.EveryName {
				continue
			}
			every++
			for _, name := range append(randNames[1:], "other") {
				other := attrs
				other.Name = name
				decision, reason := referenceAuthorize(w, other)
				if decision != got.Decision || reason != got.Reason {
					t.Fatalf("world %d, %+v: said to hold for every name (%v %q), but %q gets %v %q", wi, attrs, got.Decision, got.Reason, name, decision, reason)
				}
			}
		}
	}
	if every < 50 || named-every < 50 {
		t.Fatalf("%d of %d named requests hold for every name: the generator no longer exercises both answers", every, named)
	}
}
