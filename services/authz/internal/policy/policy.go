package policy

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"

	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/authorizer"
)

// root is the package every policy lives under.
var root = ast.MustParseRef("data.kplane.authz")

// Namespaces looks up the namespace a request targets.
type Namespaces interface {
	// Namespace returns the namespace called name, false when unknown.
	Namespace(name string) (*corev1.Namespace, bool)
}

// Set is a compiled set of modules.
type Set struct {
	query rego.PreparedEvalQuery
	// denies and allows name the query's variables of each package's deny
	// set and allow rule.
	denies, allows map[string]string
	modules        int
}

// Compile compiles modules (by file name) into one prepared query, or says
// what is wrong with them.
func Compile(ctx context.Context, modules map[string]string) (*Set, error) {
	names := slices.Sorted(maps.Keys(modules))
	opts := []func(*rego.Rego){}
	packages := map[string]map[string]bool{}
	for _, name := range names {
		m, err := ast.ParseModuleWithOpts(name, modules[name], ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, err
		}
		path := m.Package.Path
		if len(path) <= len(root) || !path.HasPrefix(root) {
			return nil, fmt.Errorf("%s: package %s is not under kplane.authz", name, strings.TrimPrefix(path.String(), "data."))
		}
		rules := packages[path.String()]
		if rules == nil {
			rules = map[string]bool{}
			packages[path.String()] = rules
		}
		for _, r := range m.Rules {
			rules[r.Head.Name.String()] = true
			if len(r.Head.Reference) > 0 {
				rules[r.Head.Reference[0].Value.String()] = true
			}
		}
		opts = append(opts, rego.ParsedModule(m))
	}
	s := &Set{denies: map[string]string{}, allows: map[string]string{}, modules: len(modules)}
	var body []string
	for i, pkg := range slices.Sorted(maps.Keys(packages)) {
		if packages[pkg]["deny"] {
			v := fmt.Sprintf("deny%d", i)
			s.denies[pkg] = v
			body = append(body, fmt.Sprintf("%s := [m | some m in %s.deny]", v, pkg))
		}
		if packages[pkg]["allow"] {
			v := fmt.Sprintf("allow%d", i)
			s.allows[pkg] = v
			body = append(body, fmt.Sprintf("%s := [true | %s.allow == true]", v, pkg))
		}
	}
	if len(body) == 0 {
		// No module decides anything: an empty query still has to be
		// prepared, so that evaluation needs no special case.
		body = append(body, "true")
	}
	opts = append(opts, rego.Query(strings.Join(body, "; ")))
	q, err := rego.New(opts...).PrepareForEval(ctx)
	if err != nil {
		return nil, err
	}
	s.query = q
	return s, nil
}

// hasAllow says whether any module may allow.
func (s *Set) hasAllow() bool { return len(s.allows) > 0 }

// decide evaluates the set for input.
func (s *Set) decide(ctx context.Context, input map[string]any) (authorizer.Decision, string, error) {
	rs, err := s.query.Eval(ctx, rego.EvalInput(input))
	if err != nil {
		return authorizer.NoOpinion, "", fmt.Errorf("evaluate Rego policies: %w", err)
	}
	if len(rs) != 1 {
		return authorizer.NoOpinion, "", fmt.Errorf("evaluate Rego policies: %d results, want 1", len(rs))
	}
	var msgs []string
	for pkg, v := range s.denies {
		set, _ := rs[0].Bindings[v].([]any)
		for _, m := range set {
			msg, ok := m.(string)
			if !ok {
				return authorizer.NoOpinion, "", fmt.Errorf("evaluate Rego policies: %s.deny holds %T, want strings", pkg, m)
			}
			msgs = append(msgs, msg)
		}
	}
	if len(msgs) > 0 {
		sort.Strings(msgs)
		return authorizer.Deny, strings.Join(slices.Compact(msgs), ", "), nil
	}
	var allowedBy []string
	for pkg, v := range s.allows {
		if set, _ := rs[0].Bindings[v].([]any); len(set) > 0 {
			allowedBy = append(allowedBy, strings.TrimPrefix(pkg, "data."))
		}
	}
	if len(allowedBy) > 0 {
		sort.Strings(allowedBy)
		return authorizer.Allow, fmt.Sprintf("Rego: allowed by %s", strings.Join(allowedBy, ", ")), nil
	}
	return authorizer.NoOpinion, "", nil
}

// Authorizer is the Rego mode over the current set of policies. It is safe
// for concurrent use.
type Authorizer struct {
	namespaces Namespaces
	log        *slog.Logger
	// changed is told which source changed once its modules are in force.
	changed func(reason string)

	reloads    *prometheus.CounterVec
	registerer prometheus.Registerer
	// failOpen gives no opinion, instead of denying, when a policy fails
	// at evaluation.
	failOpen bool

	// mu serialises updates; decisions read current without it.
	mu      sync.Mutex
	sources map[string]map[string]string
	current atomic.Pointer[Set]
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
)

// Option changes an Authorizer.
type Option func(*Authorizer)

// WithLogger sets where compile errors are logged.
func WithLogger(l *slog.Logger) Option { return func(a *Authorizer) { a.log = l } }

// WithOnChange calls f, with what changed, each time a new set of policies
// is in force.
func WithOnChange(f func(reason string)) Option { return func(a *Authorizer) { a.changed = f } }

// WithFailOpen makes a policy that fails at evaluation give no opinion
// (the next mode decides, as kube's webhook authorizer does when it cannot
// ask) instead of denying. It lets an operator's broken policy open what
// it was written to close: use it only to keep a cluster usable while a
// policy is fixed.
func WithFailOpen() Option { return func(a *Authorizer) { a.failOpen = true } }

// WithRegisterer registers the reload metrics with reg.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(a *Authorizer) { a.registerer = reg }
}

// New returns the Rego mode with no policies; namespaces resolves
// input.namespace.
func New(ctx context.Context, namespaces Namespaces, opts ...Option) (*Authorizer, error) {
	a := &Authorizer{
		namespaces: namespaces,
		log:        slog.New(slog.DiscardHandler),
		changed:    func(string) {},
		sources:    map[string]map[string]string{},
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authz", Name: "policy_reloads_total",
			Help: "Changes of the Rego policies, by result: success (in force) or failure (did not compile; the last good set stays).",
		}, []string{"result"}),
	}
	for _, o := range opts {
		o(a)
	}
	if a.registerer != nil {
		if err := a.registerer.Register(a.reloads); err != nil {
			return nil, fmt.Errorf("register policy metrics: %w", err)
		}
	}
	empty, err := Compile(ctx, nil)
	if err != nil {
		return nil, err
	}
	a.current.Store(empty)
	return a, nil
}

// Mode is a as an --authorization-mode.
func (a *Authorizer) Mode() authorizer.Mode {
	return authorizer.Mode{Name: "Rego", Authorizer: a, RuleResolver: a}
}

// SetSource replaces the modules of source (names are unique across
// sources: prefix them with the source) and compiles all modules. When they
// do not compile, the error is logged and returned and the last good set
// stays in force; the source's new modules are kept, so that the next
// change of any source compiles them again.
func (a *Authorizer) SetSource(ctx context.Context, source string, modules map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if maps.Equal(a.sources[source], modules) {
		return nil
	}
	a.sources[source] = maps.Clone(modules)
	all := map[string]string{}
	for _, src := range a.sources {
		maps.Copy(all, src)
	}
	set, err := Compile(ctx, all)
	if err != nil {
		a.reloads.WithLabelValues("failure").Inc()
		a.log.Error("Rego policies do not compile; the last good set stays in force", "source", source, "err", err)
		return fmt.Errorf("compile Rego policies: %w", err)
	}
	a.current.Store(set)
	a.reloads.WithLabelValues("success").Inc()
	a.log.Info("Rego policies in force", "source", source, "modules", set.modules)
	a.changed("policy/" + source)
	return nil
}

// Authorize evaluates the policies in force.
func (a *Authorizer) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (authorizer.Decision, string, error) {
	set := a.current.Load()
	if len(set.denies) == 0 && len(set.allows) == 0 {
		return authorizer.NoOpinion, "", nil
	}
	d, reason, err := set.decide(ctx, a.input(spec))
	if err != nil && !a.failOpen {
		// A policy that cannot be evaluated may be the one that denies:
		// allowing what it guards because it broke would turn a bug into
		// a hole.
		return authorizer.Deny, "a Rego policy failed to evaluate: " + err.Error(), err
	}
	return d, reason, err
}

// RulesFor lists no rules: policies are not rules. The list is incomplete
// when a policy may allow what the other modes' rules do not hold.
func (a *Authorizer) RulesFor(context.Context, *authz.RulesReview) (authorizer.Rules, error) {
	return authorizer.Rules{Incomplete: a.current.Load().hasAllow()}, nil
}

// input is spec as the contract's JSON: every documented field is present,
// empty when the spec leaves it out, so that a policy can compare with ""
// without guarding against undefined.
func (a *Authorizer) input(spec *authorizationv1.SubjectAccessReviewSpec) map[string]any {
	groups := make([]any, len(spec.Groups))
	for i, g := range spec.Groups {
		groups[i] = g
	}
	extra := make(map[string]any, len(spec.Extra))
	for k, vs := range spec.Extra {
		values := make([]any, len(vs))
		for i, v := range vs {
			values[i] = v
		}
		extra[k] = values
	}
	input := map[string]any{"user": spec.User, "groups": groups, "uid": spec.UID, "extra": extra}
	if ra := spec.ResourceAttributes; ra != nil {
		input["resourceAttributes"] = map[string]any{
			"namespace": ra.Namespace, "verb": ra.Verb, "group": ra.Group, "version": ra.Version,
			"resource": ra.Resource, "subresource": ra.Subresource, "name": ra.Name,
		}
	}
	if nra := spec.NonResourceAttributes; nra != nil {
		input["nonResourceAttributes"] = map[string]any{"path": nra.Path, "verb": nra.Verb}
	}
	if name := targetNamespace(spec); name != "" {
		if ns, ok := a.namespaces.Namespace(name); ok {
			input["namespace"] = map[string]any{
				"name":        ns.Name,
				"labels":      stringMap(ns.Labels),
				"annotations": stringMap(ns.Annotations),
			}
		}
	}
	return input
}

// targetNamespace is the namespace a request targets: a namespace itself,
// or the one a namespaced request is in.
func targetNamespace(spec *authorizationv1.SubjectAccessReviewSpec) string {
	ra := spec.ResourceAttributes
	if ra == nil {
		return ""
	}
	if ra.Group == "" && ra.Resource == "namespaces" && ra.Name != "" {
		return ra.Name
	}
	return ra.Namespace
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
