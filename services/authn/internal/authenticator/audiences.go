package authenticator

import (
	"context"
	"fmt"
)

// AudienceAgnostic wraps an authenticator whose tokens carry no audience
// (a static token, a bootstrap token, an OIDC ID token whose audience is a
// client id): such a token is good for the server's own audiences, implicit,
// and no others. A caller asking for audiences none of which is implicit gets
// no opinion; otherwise the response carries the audiences both name (kube's
// WrapAudienceAgnosticToken).
func AudienceAgnostic(implicit Audiences, a Authenticator) Authenticator {
	return Func(func(ctx context.Context, token string) (*Response, bool, error) {
		target, ok := AudiencesFrom(ctx)
		if !ok {
			return a.AuthenticateToken(ctx, token)
		}
		auds := implicit.Intersect(target)
		if len(auds) == 0 {
			return nil, false, nil
		}
		resp, ok, err := a.AuthenticateToken(ctx, token)
		if err != nil || !ok {
			return nil, false, err
		}
		if len(resp.Audiences) > 0 {
			return nil, false, fmt.Errorf("audience agnostic authenticator wrapped an authenticator that returned audiences: %q", resp.Audiences)
		}
		// A copy, because resp may be shared by a cache below.
		out := *resp
		out.Audiences = auds
		return &out, true, nil
	})
}
