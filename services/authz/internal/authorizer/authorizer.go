package authorizer

import (
	"context"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"kplane.dev/proto/authz"
)

// Decision is a mode's answer.
type Decision int

const (
	// NoOpinion leaves the request to the next mode.
	NoOpinion Decision = iota
	// Allow allows the request; no later mode is asked.
	Allow
	// Deny denies the request; no later mode is asked.
	Deny
)

func (d Decision) String() string {
	switch d {
	case Allow:
		return "allow"
	case Deny:
		return "deny"
	default:
		return "no-opinion"
	}
}

// Authorizer decides one request.
type Authorizer interface {
	Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error)
}

// Rules are what a SubjectRulesReview reports.
type Rules struct {
	Resource    []authorizationv1.ResourceRule
	NonResource []authorizationv1.NonResourceRule
	// Incomplete says the mode may allow more than the rules list.
	Incomplete bool
}

// RuleResolver lists the rules a user holds in a namespace.
type RuleResolver interface {
	RulesFor(ctx context.Context, review *authz.RulesReview) (Rules, error)
}

// Mode is one --authorization-mode: a name for metrics and logs, and both
// capabilities, as kube builds an authorizer and a rule resolver per mode.
type Mode struct {
	Name string
	Authorizer
	RuleResolver
}

// Chain asks its modes in order.
type Chain []Mode

var (
	_ Authorizer   = Chain(nil)
	_ RuleResolver = Chain(nil)
)

// Authorize returns the first allow or deny, with that mode's reason and
// error; when every mode has no opinion, the reasons joined by newlines and
// the errors joined, as kube's union authorizer does.
func (c Chain) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	d, reason, _, err := c.Decide(ctx, spec)
	return d, reason, err
}

// Decide is Authorize, also saying whether every mode asked answered in
// a way that holds for every name (HoldsForEveryName): then a request
// for any other object of the resource gets the same decision and
// reason.
func (c Chain) Decide(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, bool, error) {
	var reasons []string
	var errs []error
	everyName := true
	for _, m := range c {
		var scope nameScope
		d, reason, err := m.Authorize(context.WithValue(ctx, nameScopeKey{}, &scope), spec)
		// An error may differ for another name: it is never kept.
		everyName = everyName && scope.everyName && err == nil
		if err != nil {
			errs = append(errs, err)
		}
		if reason != "" {
			reasons = append(reasons, reason)
		}
		if d == Allow || d == Deny {
			return d, reason, everyName, err
		}
	}
	return NoOpinion, strings.Join(reasons, "\n"), everyName, utilerrors.NewAggregate(errs)
}

type nameScopeKey struct{}

// nameScope is where a mode says that its answer holds for every name.
type nameScope struct{ everyName bool }

// HoldsForEveryName tells the chain asking through ctx that the calling
// mode's answer to this request would be the same, reason included, for
// any other name of the resource. A mode that does not say so may answer
// otherwise for another name.
func HoldsForEveryName(ctx context.Context) {
	if s, ok := ctx.Value(nameScopeKey{}).(*nameScope); ok {
		s.everyName = true
	}
}

// RulesFor concatenates the rules of every mode in order, incomplete when
// any mode is, as kube's union rule resolver does.
func (c Chain) RulesFor(ctx context.Context, review *authz.RulesReview) (Rules, error) {
	var out Rules
	var errs []error
	for _, m := range c {
		r, err := m.RulesFor(ctx, review)
		if err != nil {
			errs = append(errs, err)
		}
		out.Resource = append(out.Resource, r.Resource...)
		out.NonResource = append(out.NonResource, r.NonResource...)
		out.Incomplete = out.Incomplete || r.Incomplete
	}
	return out, utilerrors.NewAggregate(errs)
}

// Constant is AlwaysAllow or AlwaysDeny.
type Constant Decision

// AlwaysAllow allows every request and lists the rule that holds every
// permission, as kube's alwaysAllowAuthorizer.
func AlwaysAllow() Mode {
	return Mode{Name: "AlwaysAllow", Authorizer: Constant(Allow), RuleResolver: Constant(Allow)}
}

// AlwaysDeny denies every request and lists no rules, as kube's
// alwaysDenyAuthorizer.
func AlwaysDeny() Mode {
	return Mode{Name: "AlwaysDeny", Authorizer: Constant(Deny), RuleResolver: Constant(Deny)}
}

// Authorize returns the constant decision, with kube's reason for a deny.
func (c Constant) Authorize(ctx context.Context, _ *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	HoldsForEveryName(ctx)
	if Decision(c) == Deny {
		return Deny, "Everything is forbidden.", nil
	}
	return Decision(c), "", nil
}

// RulesFor returns every permission for AlwaysAllow, none otherwise.
func (c Constant) RulesFor(context.Context, *authz.RulesReview) (Rules, error) {
	if Decision(c) != Allow {
		return Rules{}, nil
	}
	all := []string{"*"}
	return Rules{
		Resource:    []authorizationv1.ResourceRule{{Verbs: all, APIGroups: all, Resources: all}},
		NonResource: []authorizationv1.NonResourceRule{{Verbs: all, NonResourceURLs: all}},
	}, nil
}
