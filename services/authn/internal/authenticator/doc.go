// Package authenticator defines how kplane turns a bearer token into a user,
// with kube-apiserver's semantics: an Authenticator answers yes with a
// Response, no opinion (false, nil) or failure (false, error), so
// authenticators combine in a Union tried in order. It also holds the pieces
// kube-apiserver wraps around its token authenticators: the group adder that
// gives every authenticated user system:authenticated, the anonymous
// authenticator, and the audiences a caller asks a token to be valid for.
//
// The concrete authenticators live in child packages: tokenfile (static CSV),
// serviceaccount (JWTs, and in its child package informers the lookups they
// need, kept by client-go informers), bootstrap (bootstrap token Secrets),
// oidc (ID tokens of an OpenID Connect issuer), webhook (a remote TokenReview
// service) and cache (success and failure caches in front of any of them).
package authenticator
