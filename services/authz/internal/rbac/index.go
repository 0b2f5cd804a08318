package rbac

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Index is an in-memory copy of Roles, ClusterRoles, RoleBindings and
// ClusterRoleBindings, changed one object at a time. Bindings are indexed by
// the user and group names their subjects stand for, so that a decision
// looks only at the bindings of the request's user and groups. It is safe
// for concurrent use.
type Index struct {
	mu sync.RWMutex

	roles        map[nsName]ruleSet
	clusterRoles map[string]*rbacv1.ClusterRole
	// clusterRoleRules holds each ClusterRole's effective rules: its own,
	// or for an aggregated ClusterRole the union kube's aggregation
	// controller would write into it.
	clusterRoleRules map[string]ruleSet

	clusterRoleBindings map[string]*binding
	roleBindings        map[nsName]*binding
	// clusterBySubject maps a subject key to the names of the
	// ClusterRoleBindings naming it; namespacedBySubject does the same per
	// namespace for RoleBindings.
	clusterBySubject    map[string]map[string]struct{}
	namespacedBySubject map[string]map[string]map[string]struct{}
}

type nsName struct{ namespace, name string }

// ruleSet is a role's rules, kept both as objects (for aggregation) and as
// the Rego value a decision passes on, so that no request converts them.
type ruleSet struct {
	rules []rbacv1.PolicyRule
	value ast.Value
}

// binding is what a decision needs of a RoleBinding or ClusterRoleBinding.
type binding struct {
	namespace string
	roleRef   rbacv1.RoleRef
	keys      []string
	// fields are the Rego object members that do not depend on the role.
	fields [][2]*ast.Term
}

// NewIndex returns an empty index.
func NewIndex() *Index {
	return &Index{
		roles:               map[nsName]ruleSet{},
		clusterRoles:        map[string]*rbacv1.ClusterRole{},
		clusterRoleRules:    map[string]ruleSet{},
		clusterRoleBindings: map[string]*binding{},
		roleBindings:        map[nsName]*binding{},
		clusterBySubject:    map[string]map[string]struct{}{},
		namespacedBySubject: map[string]map[string]map[string]struct{}{},
	}
}

// SetRole adds or replaces a Role.
func (x *Index) SetRole(r *rbacv1.Role) {
	set := newRuleSet(r.Rules)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.roles[nsName{r.Namespace, r.Name}] = set
}

// DeleteRole removes a Role; removing one that is absent does nothing.
func (x *Index) DeleteRole(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.roles, nsName{namespace, name})
}

// SetClusterRole adds or replaces a ClusterRole and recomputes the rules of
// the aggregated ClusterRoles.
func (x *Index) SetClusterRole(r *rbacv1.ClusterRole) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.clusterRoles[r.Name] = r.DeepCopy()
	x.aggregate()
}

// DeleteClusterRole removes a ClusterRole and recomputes the rules of the
// aggregated ClusterRoles.
func (x *Index) DeleteClusterRole(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.clusterRoles, name)
	x.aggregate()
}

// ClusterRoleRules returns the effective rules of a ClusterRole: for an
// aggregated one, the rules kube's aggregation controller would write into
// it. The second result is false when the ClusterRole is absent.
func (x *Index) ClusterRoleRules(name string) ([]rbacv1.PolicyRule, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	set, ok := x.clusterRoleRules[name]
	return slices.Clone(set.rules), ok
}

// SetRoleBinding adds or replaces a RoleBinding.
func (x *Index) SetRoleBinding(b *rbacv1.RoleBinding) {
	nb := newBinding("RoleBinding", b.Namespace, b.Name, b.RoleRef, b.Subjects)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteRoleBinding(b.Namespace, b.Name)
	x.roleBindings[nsName{b.Namespace, b.Name}] = nb
	bySubject := x.namespacedBySubject[b.Namespace]
	if bySubject == nil {
		bySubject = map[string]map[string]struct{}{}
		x.namespacedBySubject[b.Namespace] = bySubject
	}
	addKeys(bySubject, nb.keys, b.Name)
}

// DeleteRoleBinding removes a RoleBinding; removing one that is absent does
// nothing.
func (x *Index) DeleteRoleBinding(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteRoleBinding(namespace, name)
}

func (x *Index) deleteRoleBinding(namespace, name string) {
	old, ok := x.roleBindings[nsName{namespace, name}]
	if !ok {
		return
	}
	delete(x.roleBindings, nsName{namespace, name})
	bySubject := x.namespacedBySubject[namespace]
	removeKeys(bySubject, old.keys, name)
	if len(bySubject) == 0 {
		delete(x.namespacedBySubject, namespace)
	}
}

// SetClusterRoleBinding adds or replaces a ClusterRoleBinding.
func (x *Index) SetClusterRoleBinding(b *rbacv1.ClusterRoleBinding) {
	nb := newBinding("ClusterRoleBinding", "", b.Name, b.RoleRef, b.Subjects)
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteClusterRoleBinding(b.Name)
	x.clusterRoleBindings[b.Name] = nb
	addKeys(x.clusterBySubject, nb.keys, b.Name)
}

// DeleteClusterRoleBinding removes a ClusterRoleBinding; removing one that
// is absent does nothing.
func (x *Index) DeleteClusterRoleBinding(name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.deleteClusterRoleBinding(name)
}

func (x *Index) deleteClusterRoleBinding(name string) {
	old, ok := x.clusterRoleBindings[name]
	if !ok {
		return
	}
	delete(x.clusterRoleBindings, name)
	removeKeys(x.clusterBySubject, old.keys, name)
}

// grants returns, as Rego values, the bindings that may apply to the user
// and groups in kube's visiting order: ClusterRoleBindings, then the
// RoleBindings of namespace, each by name. Kube visits in its informer's
// order, which is unspecified; ordering by name makes the allow reason
// deterministic.
func (x *Index) grants(user string, groups []string, namespace string) []*ast.Term {
	keys := make([]string, 0, len(groups)+1)
	keys = append(keys, userKey(user))
	for _, g := range groups {
		keys = append(keys, groupKey(g))
	}

	x.mu.RLock()
	defer x.mu.RUnlock()
	clusterNames := namesFor(x.clusterBySubject, keys)
	var namespacedNames []string
	if namespace != "" {
		namespacedNames = namesFor(x.namespacedBySubject[namespace], keys)
	}
	out := make([]*ast.Term, 0, len(clusterNames)+len(namespacedNames))
	for _, name := range clusterNames {
		out = append(out, x.grant(x.clusterRoleBindings[name]))
	}
	for _, name := range namespacedNames {
		out = append(out, x.grant(x.roleBindings[nsName{namespace, name}]))
	}
	return out
}

// grant joins a binding with the rules of its role, or with the error kube's
// rule resolver reports when the role cannot be found.
func (x *Index) grant(b *binding) *ast.Term {
	set, errText := x.resolve(b)
	rules := set.value
	if rules == nil {
		rules = ast.NewArray()
	}
	fields := make([][2]*ast.Term, 0, len(b.fields)+2)
	fields = append(fields, b.fields...)
	fields = append(fields,
		ast.Item(ast.StringTerm("rules"), ast.NewTerm(rules)),
		ast.Item(ast.StringTerm("error"), ast.StringTerm(errText)))
	return ast.ObjectTerm(fields...)
}

// resolve returns the rules of b's role, or the error kube's rule resolver
// reports when the role cannot be found.
func (x *Index) resolve(b *binding) (ruleSet, string) {
	switch b.roleRef.Kind {
	case "ClusterRole":
		if set, ok := x.clusterRoleRules[b.roleRef.Name]; ok {
			return set, ""
		}
		return ruleSet{}, fmt.Sprintf("clusterrole.rbac.authorization.k8s.io %q not found", b.roleRef.Name)
	case "Role":
		if set, ok := x.roles[nsName{b.namespace, b.roleRef.Name}]; ok {
			return set, ""
		}
		return ruleSet{}, fmt.Sprintf("role.rbac.authorization.k8s.io %q not found", b.roleRef.Name)
	default:
		return ruleSet{}, fmt.Sprintf("unsupported role reference kind: %q", b.roleRef.Kind)
	}
}

// aggregate recomputes the rules of every ClusterRole as kube's
// clusterrole-aggregation controller converges them: each pass sets every
// aggregated ClusterRole, in name order, to the union without repeats of the
// rules the other ClusterRoles its selectors match hold at that moment,
// taken in name order, starting from no rules. Rule sets only grow, so the
// passes stop once no set grows; aggregated ClusterRoles that select each
// other end with the rules of all their plain members, as in kube. The cost
// is every ClusterRole per change, which suits ClusterRoles: few, and rarely
// written.
func (x *Index) aggregate() {
	names := make([]string, 0, len(x.clusterRoles))
	for name := range x.clusterRoles {
		names = append(names, name)
	}
	sort.Strings(names)
	held := make(map[string][]rbacv1.PolicyRule, len(names))
	for _, name := range names {
		if role := x.clusterRoles[name]; role.AggregationRule == nil {
			held[name] = role.Rules
		}
	}
	for grew := true; grew; {
		grew = false
		for _, name := range names {
			role := x.clusterRoles[name]
			if role.AggregationRule == nil {
				continue
			}
			var rules []rbacv1.PolicyRule
			for _, other := range names {
				if other == name || !x.selected(role.AggregationRule, x.clusterRoles[other]) {
					continue
				}
				for _, r := range held[other] {
					if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return sameRule(have, r) }) {
						rules = append(rules, r)
					}
				}
			}
			if len(rules) != len(held[name]) {
				grew = true
			}
			held[name] = rules
		}
	}
	next := make(map[string]ruleSet, len(names))
	for _, name := range names {
		next[name] = newRuleSet(held[name])
	}
	x.clusterRoleRules = next
}

// selected reports whether any selector of rule matches role's labels; a
// selector that does not parse matches nothing, as the controller skips it.
func (x *Index) selected(rule *rbacv1.AggregationRule, role *rbacv1.ClusterRole) bool {
	for i := range rule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&rule.ClusterRoleSelectors[i])
		if err != nil {
			continue
		}
		if sel.Matches(labels.Set(role.Labels)) {
			return true
		}
	}
	return false
}

func sameRule(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) &&
		slices.Equal(a.Resources, b.Resources) && slices.Equal(a.ResourceNames, b.ResourceNames) &&
		slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

func newRuleSet(rules []rbacv1.PolicyRule) ruleSet {
	terms := make([]*ast.Term, 0, len(rules))
	for _, r := range rules {
		terms = append(terms, ast.ObjectTerm(
			ast.Item(ast.StringTerm("verbs"), stringsTerm(r.Verbs)),
			ast.Item(ast.StringTerm("apiGroups"), stringsTerm(r.APIGroups)),
			ast.Item(ast.StringTerm("resources"), stringsTerm(r.Resources)),
			ast.Item(ast.StringTerm("resourceNames"), stringsTerm(r.ResourceNames)),
			ast.Item(ast.StringTerm("nonResourceURLs"), stringsTerm(r.NonResourceURLs)),
		))
	}
	return ruleSet{rules: slices.Clone(rules), value: ast.NewArray(terms...)}
}

func newBinding(kind, namespace, name string, ref rbacv1.RoleRef, subjects []rbacv1.Subject) *binding {
	subjectTerms := make([]*ast.Term, 0, len(subjects))
	var keys []string
	for _, s := range subjects {
		subjectTerms = append(subjectTerms, ast.ObjectTerm(
			ast.Item(ast.StringTerm("kind"), ast.StringTerm(s.Kind)),
			ast.Item(ast.StringTerm("name"), ast.StringTerm(s.Name)),
			ast.Item(ast.StringTerm("namespace"), ast.StringTerm(s.Namespace)),
		))
		if key, ok := subjectKey(s, namespace); ok && !slices.Contains(keys, key) {
			keys = append(keys, key)
		}
	}
	return &binding{
		namespace: namespace,
		roleRef:   ref,
		keys:      keys,
		fields: [][2]*ast.Term{
			ast.Item(ast.StringTerm("kind"), ast.StringTerm(kind)),
			ast.Item(ast.StringTerm("name"), ast.StringTerm(name)),
			ast.Item(ast.StringTerm("namespace"), ast.StringTerm(namespace)),
			ast.Item(ast.StringTerm("roleKind"), ast.StringTerm(ref.Kind)),
			ast.Item(ast.StringTerm("roleName"), ast.StringTerm(ref.Name)),
			ast.Item(ast.StringTerm("subjects"), ast.ArrayTerm(subjectTerms...)),
		},
	}
}

// subjectKey is the index key of the user or group a subject stands for: a
// ServiceAccount is the user system:serviceaccount:<ns>:<name>, its
// namespace defaulting to the binding's. Subjects that can match no request
// are not indexed.
func subjectKey(s rbacv1.Subject, bindingNamespace string) (string, bool) {
	switch s.Kind {
	case rbacv1.UserKind:
		return userKey(s.Name), true
	case rbacv1.GroupKind:
		return groupKey(s.Name), true
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		if ns == "" {
			return "", false
		}
		return userKey(serviceAccountUser(ns, s.Name)), true
	default:
		return "", false
	}
}

func serviceAccountUser(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

func userKey(name string) string  { return "u:" + name }
func groupKey(name string) string { return "g:" + name }

func addKeys(bySubject map[string]map[string]struct{}, keys []string, name string) {
	for _, k := range keys {
		names := bySubject[k]
		if names == nil {
			names = map[string]struct{}{}
			bySubject[k] = names
		}
		names[name] = struct{}{}
	}
}

func removeKeys(bySubject map[string]map[string]struct{}, keys []string, name string) {
	for _, k := range keys {
		delete(bySubject[k], name)
		if len(bySubject[k]) == 0 {
			delete(bySubject, k)
		}
	}
}

// namesFor returns the sorted, distinct names indexed under any of keys.
func namesFor(bySubject map[string]map[string]struct{}, keys []string) []string {
	var out []string
	for _, k := range keys {
		for name := range bySubject[k] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func stringsTerm(values []string) *ast.Term {
	terms := make([]*ast.Term, len(values))
	for i, v := range values {
		terms[i] = ast.StringTerm(v)
	}
	return ast.ArrayTerm(terms...)
}

// RulesFor returns the rules user with groups holds in namespace, as kube's
// rule resolver (pkg/registry/rbac/validation) collects them for a
// SelfSubjectRulesReview: the rules of every ClusterRoleBinding that applies,
// then of every RoleBinding of namespace that applies, in the visiting order
// of grants, each role's rules in its order and repeats kept. The errors are
// those of roles that cannot be found, without repeats, in that order.
func (x *Index) RulesFor(user string, groups []string, namespace string) ([]rbacv1.PolicyRule, []error) {
	keys := make([]string, 0, len(groups)+1)
	keys = append(keys, userKey(user))
	for _, g := range groups {
		keys = append(keys, groupKey(g))
	}

	x.mu.RLock()
	defer x.mu.RUnlock()
	var bindings []*binding
	for _, name := range namesFor(x.clusterBySubject, keys) {
		bindings = append(bindings, x.clusterRoleBindings[name])
	}
	if namespace != "" {
		for _, name := range namesFor(x.namespacedBySubject[namespace], keys) {
			bindings = append(bindings, x.roleBindings[nsName{namespace, name}])
		}
	}
	var rules []rbacv1.PolicyRule
	var errs []error
	var seen []string
	for _, b := range bindings {
		// The index keys only narrow: the binding applies when one of its
		// subjects names the user or a group, which the keys already
		// establish exactly for users, groups and service accounts.
		set, errText := x.resolve(b)
		if errText != "" {
			if !slices.Contains(seen, errText) {
				seen = append(seen, errText)
				errs = append(errs, errors.New(errText))
			}
			continue
		}
		rules = append(rules, set.rules...)
	}
	return slices.Clone(rules), errs
}
