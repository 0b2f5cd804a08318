// Package bootstrap authenticates bootstrap tokens ("abcdef.0123456789abcdef")
// against Secrets of type bootstrap.kubernetes.io/token named
// bootstrap-token-<id> in kube-system, with kube-apiserver's rules: the secret
// part must match, the Secret must allow authentication, must not have
// expired, and may add groups under system:bootstrappers:.
package bootstrap
