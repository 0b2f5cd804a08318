// Package serviceaccount issues and authenticates ServiceAccount tokens, the
// JWTs of kube-apiserver: bound tokens (audiences, expiry, a jti and the
// kubernetes.io claim naming the service account and an optional pod, secret
// or node the token is bound to) and legacy secret-based tokens (issuer
// kubernetes/serviceaccount, valid while their Secret holds them).
//
// A Signer signs with one private key (RS256 or ES256/384/512) and names it
// in the kid header; an Authenticator verifies with a set of public keys, so
// keys rotate by adding the new public key, switching the signer, and
// removing the old public key once its tokens have expired. What a token
// refers to is checked, on every authentication, through a Getter that the
// service implements over its store of objects.
package serviceaccount
