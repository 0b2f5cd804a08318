package authenticator

import (
	"context"
	"errors"
)

// ErrInvalidBearerToken is kube-apiserver's answer for a token that no
// authenticator recognised.
var ErrInvalidBearerToken = errors.New("invalid bearer token")

// AnonymousUser is who an unauthenticated request acts as when anonymous
// access is on.
func AnonymousUser() *Response {
	return &Response{User: UserInfo{Name: Anonymous, Groups: []string{AllUnauthenticated}}}
}

// Bearer assembles what kube-apiserver does with a request's bearer token:
// the token authenticators' union answers for a non-empty token, an
// unrecognised token is refused with ErrInvalidBearerToken, authenticated
// users get system:authenticated, and, when anonymous is true, a request with
// no token (the empty string) is system:anonymous. A token that was presented
// but refused never falls back to anonymous.
func Bearer(tokens Authenticator, anonymous bool) Authenticator {
	bearer := AuthenticatedGroupAdder(Func(func(ctx context.Context, token string) (*Response, bool, error) {
		if token == "" {
			return nil, false, nil
		}
		resp, ok, err := tokens.AuthenticateToken(ctx, token)
		if !ok && err == nil {
			err = ErrInvalidBearerToken
		}
		return resp, ok, err
	}))
	if !anonymous {
		return bearer
	}
	return UnionFailOnError(bearer, Func(func(context.Context, string) (*Response, bool, error) {
		return AnonymousUser(), true, nil
	}))
}
