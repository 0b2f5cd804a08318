package authenticator

import (
	"context"
	"slices"
)

// AuthenticatedGroupAdder gives every user a authenticates the group
// system:authenticated, unless the user is anonymous or already carries
// system:authenticated or system:unauthenticated (kube's group adder).
func AuthenticatedGroupAdder(a Authenticator) Authenticator {
	return Func(func(ctx context.Context, token string) (*Response, bool, error) {
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil || !ok {
			return nil, ok, err
		}
		if resp.User.Name == Anonymous ||
			slices.Contains(resp.User.Groups, AllAuthenticated) ||
			slices.Contains(resp.User.Groups, AllUnauthenticated) {
			return resp, true, nil
		}
		// A copy, because resp may be shared: a cache hands the same
		// Response to every caller.
		out := *resp
		out.User.Groups = append(slices.Clip(slices.Clone(resp.User.Groups)), AllAuthenticated)
		return &out, true, nil
	})
}
