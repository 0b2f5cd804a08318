package escalation

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Covers reports whether owner's rules allow everything servant's rules
// do, and the atomic rules they do not, as kube's validation.Covers:
// servant's rules are broken into one verb, one group, one resource (or
// URL) and one name each, so each is covered by a single owner rule or
// not at all.
func Covers(owner, servant []rbacv1.PolicyRule) (bool, []rbacv1.PolicyRule) {
	var uncovered []rbacv1.PolicyRule
	for _, s := range servant {
		for _, sub := range breakdown(s) {
			if !slices.ContainsFunc(owner, func(o rbacv1.PolicyRule) bool { return ruleCovers(o, sub) }) {
				uncovered = append(uncovered, sub)
			}
		}
	}
	return len(uncovered) == 0, uncovered
}

// breakdown splits a rule into rules of at most one verb, group,
// resource and resource name; non-resource URLs combine with verbs only.
func breakdown(r rbacv1.PolicyRule) []rbacv1.PolicyRule {
	var subs []rbacv1.PolicyRule
	for _, g := range r.APIGroups {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				if len(r.ResourceNames) == 0 {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}})
					continue
				}
				for _, n := range r.ResourceNames {
					subs = append(subs, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{res}, Verbs: []string{v}, ResourceNames: []string{n}})
				}
			}
		}
	}
	for _, u := range r.NonResourceURLs {
		for _, v := range r.Verbs {
			subs = append(subs, rbacv1.PolicyRule{NonResourceURLs: []string{u}, Verbs: []string{v}})
		}
	}
	return subs
}

func hasAll(set, want []string) bool {
	for _, w := range want {
		if !slices.Contains(set, w) {
			return false
		}
	}
	return true
}

// resourcesCover also accepts "*/<subresource>" for any resource's
// subresource.
func resourcesCover(set, want []string) bool {
	if slices.Contains(set, rbacv1.ResourceAll) || hasAll(set, want) {
		return true
	}
	for _, w := range want {
		if slices.Contains(set, w) {
			continue
		}
		_, sub, ok := strings.Cut(w, "/")
		if !ok || !slices.Contains(set, "*/"+sub) {
			return false
		}
	}
	return true
}

// urlsCover accepts a trailing * in owner paths as a prefix match.
func urlsCover(set, want []string) bool {
	for _, w := range want {
		if !slices.ContainsFunc(set, func(o string) bool {
			return o == w || (strings.HasSuffix(o, "*") && strings.HasPrefix(w, strings.TrimRight(o, "*")))
		}) {
			return false
		}
	}
	return true
}

// ruleCovers reports whether owner allows everything sub, an atomic rule,
// does.
func ruleCovers(owner, sub rbacv1.PolicyRule) bool {
	verbs := slices.Contains(owner.Verbs, rbacv1.VerbAll) || hasAll(owner.Verbs, sub.Verbs)
	groups := slices.Contains(owner.APIGroups, rbacv1.APIGroupAll) || hasAll(owner.APIGroups, sub.APIGroups)
	resources := resourcesCover(owner.Resources, sub.Resources)
	urls := urlsCover(owner.NonResourceURLs, sub.NonResourceURLs)
	names := len(owner.ResourceNames) == 0 || (len(sub.ResourceNames) != 0 && hasAll(owner.ResourceNames, sub.ResourceNames))
	return verbs && groups && resources && names && urls
}

// compact merges rules of one group and one resource and nothing but
// verbs into one rule per group and resource, as kube's CompactRules
// does before it lists missing rules.
func compact(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	type groupResource struct{ group, resource string }
	simple := map[groupResource]int{}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := groupResource{r.APIGroups[0], r.Resources[0]}
		if i, ok := simple[k]; ok {
			out[i].Verbs = append(out[i].Verbs, r.Verbs...)
			continue
		}
		simple[k] = len(out)
		c := r
		c.Verbs = slices.Clone(r.Verbs)
		out = append(out, c)
	}
	return out
}

// compactString is kube's CompactString of a rule, as escalation
// messages show it: {APIGroups:[""], Resources:["secrets"], Verbs:["get"]}.
func compactString(r rbacv1.PolicyRule) string {
	var parts []string
	var args []any
	for _, f := range []struct {
		name   string
		values []string
	}{
		{"APIGroups", r.APIGroups},
		{"Resources", r.Resources},
		{"NonResourceURLs", r.NonResourceURLs},
		{"ResourceNames", r.ResourceNames},
		{"Verbs", r.Verbs},
	} {
		if len(f.values) > 0 {
			parts = append(parts, f.name+":%q")
			args = append(args, f.values)
		}
	}
	return fmt.Sprintf("{"+strings.Join(parts, ", ")+"}", args...)
}
