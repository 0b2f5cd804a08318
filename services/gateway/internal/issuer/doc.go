// Package issuer serves the service account issuer's OpenID Connect
// discovery document and key set, as kube-apiserver serves them at
// /.well-known/openid-configuration and /openid/v1/jwks, from the authn
// service, which owns the signing keys.
package issuer
