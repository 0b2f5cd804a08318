package kinds

import (
	"fmt"
	"slices"

	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/openapi/builtin"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/services/core/internal/reviews"
)

// WithReviews adds to res the review resources, which are answered
// through rpc and never stored, and the token subresource of service
// accounts, answered by tokens. Review times are read from c.
func WithReviews(res []*resource.Resource, rpc authzreview.Requester, tokens resource.Creater, c clock.PassiveClock) ([]*resource.Resource, error) {
	scheme, err := newScheme()
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(res, func(r *resource.Resource) bool { return r.GroupVersionResource == ServiceAccounts })
	if i < 0 {
		return nil, fmt.Errorf("no %s to serve tokens for", ServiceAccounts)
	}
	tokenObjects, err := objects.NewTyped(scheme, reviews.TokenRequestKind, "")
	if err != nil {
		return nil, fmt.Errorf("declare token requests: %w", err)
	}
	tokenSchema, err := builtin.Schema(reviews.TokenRequestKind)
	if err != nil {
		return nil, fmt.Errorf("declare token requests: %w", err)
	}
	sa := *res[i]
	sa.Subresources.Actions = []resource.Action{{Name: "token", Kind: reviews.TokenRequestKind, Objects: tokenObjects, Schema: tokenSchema, Creater: tokens}}
	out := slices.Clone(res)
	out[i] = &sa
	if c == nil {
		c = clock.RealClock{}
	}
	for _, r := range reviews.Resources(rpc, c) {
		gvk := r.GroupVersionKind()
		if r.Objects, err = objects.NewTyped(scheme, gvk, ""); err != nil {
			return nil, fmt.Errorf("declare %s: %w", r.GroupVersionResource, err)
		}
		if r.Schema, err = builtin.Schema(gvk); err != nil {
			return nil, fmt.Errorf("declare %s: %w", r.GroupVersionResource, err)
		}
		out = append(out, r)
	}
	return out, nil
}
