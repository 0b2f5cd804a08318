// Package oidc authenticates OpenID Connect ID tokens of one issuer with the
// claim mapping of kube-apiserver's --oidc-* flags. Discovery and token
// verification (issuer, audience containing the client id, expiry,
// signature algorithms) are github.com/coreos/go-oidc's, as in kube, and
// keys are go-jose's; kplane keeps only the key set's refresh policy: the
// set is fetched again when a token names a key id it does not hold, so the
// issuer can rotate its signing keys, but at most once per refresh interval,
// so forged key ids cannot make authn hammer the issuer. The username,
// groups and required claims map as kube maps them, prefixes included.
package oidc
