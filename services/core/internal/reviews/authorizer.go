package reviews

import (
	"context"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"kplane.dev/libs/apiserver/rest"
)

// Authorizer asks authz what a request does beyond its own verb (a write
// that creates the object it updates needs create), for the REST layer.
type Authorizer struct{ rpc Requester }

var _ rest.Authorizer = (*Authorizer)(nil)

// NewAuthorizer asks authz through rpc.
func NewAuthorizer(rpc Requester) *Authorizer { return &Authorizer{rpc: rpc} }

// Authorize asks authz whether u may do what attrs say.
func (a *Authorizer) Authorize(ctx context.Context, u *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) (bool, string, error) {
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	status, err := authorize(ctx, a.rpc, authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: attrs, User: u.Username, UID: u.UID, Groups: u.Groups, Extra: authzExtra(extra),
	})
	if err != nil {
		return false, "", err
	}
	return status.Allowed, status.Reason, nil
}
