package authorizer

import (
	"context"

	authorizationv1 "k8s.io/api/authorization/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/rbac"
)

// RBAC is the RBAC mode over index: it allows or has no opinion, never
// denies.
func RBAC(a *rbac.Authorizer, index *rbac.Index) Mode {
	m := rbacMode{a: a, index: index}
	return Mode{Name: "RBAC", Authorizer: m, RuleResolver: m}
}

type rbacMode struct {
	a     *rbac.Authorizer
	index *rbac.Index
}

func (m rbacMode) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	r, err := m.a.Decide(ctx, rbac.AttributesFromSpec(*spec))
	if r.EveryName {
		HoldsForEveryName(ctx)
	}
	if r.Decision == rbac.DecisionAllow {
		return Allow, r.Reason, err
	}
	return NoOpinion, r.Reason, err
}

// RulesFor splits each rule as kube's RBACAuthorizer.RulesFor does: a rule
// with resources is a resource rule, one with non-resource URLs a
// non-resource rule (a rule with both is both). A role that cannot be found
// is an error, which the review reports as incomplete.
func (m rbacMode) RulesFor(_ context.Context, review *authz.RulesReview) (Rules, error) {
	rules, errs := m.index.RulesFor(review.User, review.Groups, review.Namespace)
	var out Rules
	for _, r := range rules {
		if len(r.Resources) > 0 {
			out.Resource = append(out.Resource, authorizationv1.ResourceRule{
				Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames,
			})
		}
		if len(r.NonResourceURLs) > 0 {
			out.NonResource = append(out.NonResource, authorizationv1.NonResourceRule{
				Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs,
			})
		}
	}
	return out, utilerrors.NewAggregate(errs)
}
