package policy

import (
	"context"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"

	"kplane.dev/libs/regopolicy"
	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/authorizer"
)

// Root is the package every policy lives under.
const Root = "kplane.authz"

// rules are what the mode reads of each policy package.
var rules = []regopolicy.Rule{{Name: "deny", Kind: regopolicy.Messages}, {Name: "allow", Kind: regopolicy.Boolean}}

// Namespaces looks up the namespace a request targets.
type Namespaces interface {
	// Namespace returns the namespace called name, false when unknown.
	Namespace(name string) (*corev1.Namespace, bool)
}

// Authorizer is the Rego mode over the current set of policies. It is safe
// for concurrent use.
type Authorizer struct {
	namespaces Namespaces
	engine     *regopolicy.Engine
	// failOpen gives no opinion, instead of denying, when a policy fails
	// at evaluation.
	failOpen bool
	opts     []regopolicy.Option
}

var (
	_ authorizer.Authorizer   = (*Authorizer)(nil)
	_ authorizer.RuleResolver = (*Authorizer)(nil)
	_ regopolicy.Sink         = (*Authorizer)(nil)
)

// Option changes an Authorizer.
type Option func(*Authorizer)

// WithLogger sets where compile errors are logged.
func WithLogger(l *slog.Logger) Option {
	return func(a *Authorizer) { a.opts = append(a.opts, regopolicy.WithLogger(l)) }
}

// WithOnChange calls f, with what changed, each time a new set of policies
// is in force.
func WithOnChange(f func(reason string)) Option {
	return func(a *Authorizer) {
		a.opts = append(a.opts, regopolicy.WithOnChange(func(source string) { f("policy/" + source) }))
	}
}

// WithFailOpen makes a policy that fails at evaluation give no opinion
// (the next mode decides, as kube's webhook authorizer does when it cannot
// ask) instead of denying. It lets an operator's broken policy open what
// it was written to close: use it only to keep a cluster usable while a
// policy is fixed.
func WithFailOpen() Option { return func(a *Authorizer) { a.failOpen = true } }

// WithRegisterer registers the reload metrics with reg:
// kplane_authz_policy_reloads_total.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(a *Authorizer) { a.opts = append(a.opts, regopolicy.WithMetrics(reg, "authz")) }
}

// New returns the Rego mode with no policies; namespaces resolves
// input.namespace.
func New(ctx context.Context, namespaces Namespaces, opts ...Option) (*Authorizer, error) {
	a := &Authorizer{namespaces: namespaces}
	for _, o := range opts {
		o(a)
	}
	e, err := regopolicy.New(ctx, Root, rules, a.opts...)
	if err != nil {
		return nil, err
	}
	a.engine = e
	return a, nil
}

// Mode is a as an --authorization-mode.
func (a *Authorizer) Mode() authorizer.Mode {
	return authorizer.Mode{Name: "Rego", Authorizer: a, RuleResolver: a}
}

// SetSource replaces the modules of source (names are unique across
// sources: prefix them with the source) and compiles all modules. When they
// do not compile, the error is logged and returned and the last good set
// stays in force.
func (a *Authorizer) SetSource(ctx context.Context, source string, modules map[string]string) error {
	return a.engine.SetSource(ctx, source, modules)
}

// Authorize evaluates the policies in force: any deny message denies, the
// messages as the reason; otherwise an allow that is true allows.
func (a *Authorizer) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (authorizer.Decision, string, error) {
	set := a.engine.Current()
	if !readsName(set, spec) {
		authorizer.HoldsForEveryName(ctx)
	}
	if set.Empty() {
		return authorizer.NoOpinion, "", nil
	}
	res, err := set.Eval(ctx, a.input(spec))
	if err != nil {
		if a.failOpen {
			return authorizer.NoOpinion, "", err
		}
		// A policy that cannot be evaluated may be the one that denies:
		// allowing what it guards because it broke would turn a bug into
		// a hole.
		return authorizer.Deny, "a Rego policy failed to evaluate: " + err.Error(), err
	}
	if msgs := res.Messages("deny"); len(msgs) > 0 {
		return authorizer.Deny, strings.Join(msgs, ", "), nil
	}
	if pkgs := res.Packages("allow"); len(pkgs) > 0 {
		return authorizer.Allow, "Rego: allowed by " + strings.Join(pkgs, ", "), nil
	}
	return authorizer.NoOpinion, "", nil
}

// readsName says whether the policies in force may read the name a
// resource request carries: in its resourceAttributes, or as the
// namespace it targets, which for a namespace is the one it names.
func readsName(set *regopolicy.Set, spec *authorizationv1.SubjectAccessReviewSpec) bool {
	if set.Empty() {
		return false
	}
	if set.ReadsInput("resourceAttributes", "name") {
		return true
	}
	ra := spec.ResourceAttributes
	return ra != nil && ra.Group == "" && ra.Resource == "namespaces" && set.ReadsInput("namespace")
}

// RulesFor lists no rules: policies are not rules. The list is incomplete
// when a policy may allow what the other modes' rules do not hold.
func (a *Authorizer) RulesFor(context.Context, *authz.RulesReview) (authorizer.Rules, error) {
	return authorizer.Rules{Incomplete: a.engine.Current().Defines("allow")}, nil
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
