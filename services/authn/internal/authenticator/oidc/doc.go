// Package oidc authenticates OpenID Connect ID tokens of one issuer with the
// claim mapping of kube-apiserver's --oidc-* flags: the issuer's discovery
// document and JSON Web Key Set are fetched over HTTPS, the key set is
// fetched again (at most once per refresh interval) when a token names a key
// id it does not hold, so the issuer can rotate its signing keys; the
// audience must contain the client id; the username, groups and required
// claims map as kube maps them, prefixes included.
package oidc
