// Package webhook authenticates tokens by asking a remote TokenReview
// service, as kube-apiserver's --authentication-token-webhook-config-file
// does: the config file is a kubeconfig whose cluster is the service (server
// URL, certificate-authority or -data) and whose user is authn's client
// certificate; each token is POSTed as an authentication.k8s.io/v1
// TokenReview, and the reply's status.authenticated, user and audiences
// decide.
package webhook
