package rbac

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// world is a set of RBAC objects, loaded into an Index for the engine and
// read directly by the reference evaluator.
type world struct {
	roles               []rbacv1.Role
	clusterRoles        []rbacv1.ClusterRole
	roleBindings        []rbacv1.RoleBinding
	clusterRoleBindings []rbacv1.ClusterRoleBinding
}

func (w world) load(x *Index) {
	for i := range w.roles {
		x.SetRole(&w.roles[i])
	}
	for i := range w.clusterRoles {
		x.SetClusterRole(&w.clusterRoles[i])
	}
	for i := range w.roleBindings {
		x.SetRoleBinding(&w.roleBindings[i])
	}
	for i := range w.clusterRoleBindings {
		x.SetClusterRoleBinding(&w.clusterRoleBindings[i])
	}
}

// referenceAuthorize is kube's RBAC authorizer written plainly: rbac.go's
// Authorize and VisitRulesFor over rules resolved as the rule resolver does,
// with the matching helpers of evaluation_helpers.go. It visits bindings in
// name order, as the engine does.
func referenceAuthorize(w world, a Attributes) (Decision, string) {
	aggregated := referenceAggregate(w.clusterRoles)
	var errs []string
	resolve := func(ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, string) {
		switch ref.Kind {
		case "ClusterRole":
			if rules, ok := aggregated[ref.Name]; ok {
				return rules, ""
			}
			return nil, fmt.Sprintf("clusterrole.rbac.authorization.k8s.io %q not found", ref.Name)
		case "Role":
			for _, r := range w.roles {
				if r.Namespace == namespace && r.Name == ref.Name {
					return r.Rules, ""
				}
			}
			return nil, fmt.Sprintf("role.rbac.authorization.k8s.io %q not found", ref.Name)
		default:
			return nil, fmt.Sprintf("unsupported role reference kind: %q", ref.Kind)
		}
	}
	crbs := slices.Clone(w.clusterRoleBindings)
	sort.Slice(crbs, func(i, j int) bool { return crbs[i].Name < crbs[j].Name })
	for _, b := range crbs {
		i, ok := refAppliesTo(a, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := resolve(b.RoleRef, "")
		for _, r := range rules {
			if refRuleAllows(a, r) {
				return DecisionAllow, fmt.Sprintf("RBAC: allowed by ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, refDescribeSubject(b.Subjects[i], ""))
			}
		}
		if err != "" {
			errs = append(errs, err)
		}
	}
	if a.Namespace != "" {
		rbs := slices.Clone(w.roleBindings)
		sort.Slice(rbs, func(i, j int) bool { return rbs[i].Name < rbs[j].Name })
		for _, b := range rbs {
			if b.Namespace != a.Namespace {
				continue
			}
			i, ok := refAppliesTo(a, b.Subjects, b.Namespace)
			if !ok {
				continue
			}
			rules, err := resolve(b.RoleRef, b.Namespace)
			for _, r := range rules {
				if refRuleAllows(a, r) {
					return DecisionAllow, fmt.Sprintf("RBAC: allowed by RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, refDescribeSubject(b.Subjects[i], b.Namespace))
				}
			}
			if err != "" {
				errs = append(errs, err)
			}
		}
	}
	return DecisionNoOpinion, refAggregateErrors(errs)
}

// refAggregateErrors formats errors as k8s.io/apimachinery's
// utilerrors.NewAggregate(...).Error() does.
func refAggregateErrors(errs []string) string {
	switch len(errs) {
	case 0:
		return ""
	case 1:
		return "RBAC: " + errs[0]
	}
	var seen []string
	for _, e := range errs {
		if !slices.Contains(seen, e) {
			seen = append(seen, e)
		}
	}
	if len(seen) == 1 {
		return "RBAC: " + seen[0]
	}
	return "RBAC: [" + strings.Join(seen, ", ") + "]"
}

// referenceAggregate runs the aggregation controller's step over every
// aggregated ClusterRole, starting from no rules, until nothing changes.
func referenceAggregate(roles []rbacv1.ClusterRole) map[string][]rbacv1.PolicyRule {
	sorted := slices.Clone(roles)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	stored := map[string][]rbacv1.PolicyRule{}
	for _, r := range sorted {
		if r.AggregationRule == nil {
			stored[r.Name] = r.Rules
		} else {
			stored[r.Name] = nil
		}
	}
	for changed := true; changed; {
		changed = false
		for _, r := range sorted {
			if r.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, other := range sorted {
				if other.Name == r.Name || !refSelected(r.AggregationRule, other.Labels) {
					continue
				}
				for _, rule := range stored[other.Name] {
					if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return fmt.Sprint(have) == fmt.Sprint(rule) }) {
						rules = append(rules, rule)
					}
				}
			}
			if fmt.Sprint(rules) != fmt.Sprint(stored[r.Name]) {
				stored[r.Name] = rules
				changed = true
			}
		}
	}
	return stored
}

func refSelected(rule *rbacv1.AggregationRule, set map[string]string) bool {
	for i := range rule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&rule.ClusterRoleSelectors[i])
		if err == nil && sel.Matches(labels.Set(set)) {
			return true
		}
	}
	return false
}

func refAppliesTo(a Attributes, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		switch s.Kind {
		case "User":
			if a.User == s.Name {
				return i, true
			}
		case "Group":
			if slices.Contains(a.Groups, s.Name) {
				return i, true
			}
		case "ServiceAccount":
			ns := namespace
			if s.Namespace != "" {
				ns = s.Namespace
			}
			if ns != "" && a.User == "system:serviceaccount:"+ns+":"+s.Name {
				return i, true
			}
		}
	}
	return 0, false
}

func refDescribeSubject(s rbacv1.Subject, bindingNamespace string) string {
	if s.Kind == "ServiceAccount" {
		if s.Namespace != "" {
			return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+s.Namespace)
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+bindingNamespace)
	}
	return fmt.Sprintf("%s %q", s.Kind, s.Name)
}

func refRuleAllows(a Attributes, rule rbacv1.PolicyRule) bool {
	if a.ResourceRequest {
		combined := a.Resource
		if a.Subresource != "" {
			combined = a.Resource + "/" + a.Subresource
		}
		return refVerbMatches(rule, a.Verb) && refAPIGroupMatches(rule, a.APIGroup) &&
			refResourceMatches(rule, combined, a.Subresource) && refResourceNameMatches(rule, a.Name)
	}
	return refVerbMatches(rule, a.Verb) && refNonResourceURLMatches(rule, a.Path)
}

func refVerbMatches(rule rbacv1.PolicyRule, verb string) bool {
	for _, v := range rule.Verbs {
		if v == rbacv1.VerbAll || v == verb {
			return true
		}
	}
	return false
}

func refAPIGroupMatches(rule rbacv1.PolicyRule, group string) bool {
	for _, g := range rule.APIGroups {
		if g == rbacv1.APIGroupAll || g == group {
			return true
		}
	}
	return false
}

func refResourceMatches(rule rbacv1.PolicyRule, combined, subresource string) bool {
	for _, r := range rule.Resources {
		if r == rbacv1.ResourceAll || r == combined {
			return true
		}
		if subresource == "" {
			continue
		}
		if len(r) == len(subresource)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, subresource) {
			return true
		}
	}
	return false
}

func refResourceNameMatches(rule rbacv1.PolicyRule, name string) bool {
	if len(rule.ResourceNames) == 0 {
		return true
	}
	return slices.Contains(rule.ResourceNames, name)
}

func refNonResourceURLMatches(rule rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		if u == rbacv1.NonResourceAll || u == path {
			return true
		}
		if strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")) {
			return true
		}
	}
	return false
}
