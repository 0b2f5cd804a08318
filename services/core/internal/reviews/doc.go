// Package reviews serves the kinds that are created and never stored:
// authentication.k8s.io/v1 TokenReview and SelfSubjectReview,
// authorization.k8s.io/v1 SubjectAccessReview, SelfSubjectAccessReview,
// LocalSubjectAccessReview and SelfSubjectRulesReview, and the
// serviceaccounts/token subresource (TokenRequest). Core validates each as
// kube-apiserver does, fills in the caller's identity where the kind asks
// for it, and forwards the question to authn or authz over NATS
// (proto/authn, proto/authz); their answer is the response.
package reviews
