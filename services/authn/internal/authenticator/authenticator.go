package authenticator

import (
	"context"
	"slices"
)

// Names kube-apiserver gives to well-known users and groups.
const (
	Anonymous          = "system:anonymous"
	AllAuthenticated   = "system:authenticated"
	AllUnauthenticated = "system:unauthenticated"
)

// Authenticator authenticates a bearer token. It returns ok with a Response
// when the token is recognised and valid, (nil, false, nil) when the token is
// not one it handles, and an error when the token is one it handles but is not
// valid, or when it could not decide.
type Authenticator interface {
	AuthenticateToken(ctx context.Context, token string) (*Response, bool, error)
}

// Func lets a plain function serve as an Authenticator.
type Func func(ctx context.Context, token string) (*Response, bool, error)

// AuthenticateToken calls f.
func (f Func) AuthenticateToken(ctx context.Context, token string) (*Response, bool, error) {
	return f(ctx, token)
}

// UserInfo is the identity a token stands for, as a TokenReview reports it.
type UserInfo struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Response is a successful authentication: the user, and the audiences (of
// those the caller asked for) that the token is valid for.
type Response struct {
	User      UserInfo
	Audiences Audiences
}

// Audiences is a list of token audiences.
type Audiences []string

// Has reports whether a is one of the audiences.
func (a Audiences) Has(aud string) bool {
	return slices.Contains(a, aud)
}

// Intersect returns the audiences in both a and tar, in the order of a.
func (a Audiences) Intersect(tar Audiences) Audiences {
	var out Audiences
	for _, aud := range a {
		if tar.Has(aud) {
			out = append(out, aud)
		}
	}
	return out
}

type audiencesKey struct{}

// WithAudiences returns a context carrying the audiences a caller (a
// TokenReview's spec.audiences) wants the token to be valid for.
func WithAudiences(ctx context.Context, auds Audiences) context.Context {
	return context.WithValue(ctx, audiencesKey{}, auds)
}

// AudiencesFrom returns the audiences set by WithAudiences, if any.
func AudiencesFrom(ctx context.Context) (Audiences, bool) {
	auds, ok := ctx.Value(audiencesKey{}).(Audiences)
	return auds, ok
}
