// Package authorizer chains authorization modes as kube-apiserver's
// --authorization-mode does (k8s.io/apiserver/pkg/authorization/union):
// each mode allows, denies or has no opinion; the first that allows or
// denies decides, and a chain where none does has no opinion, with the
// reasons of the modes asked joined by newlines and their errors
// aggregated. It holds the modes that need no state of their own:
// AlwaysAllow, AlwaysDeny, RBAC over an rbac.Index, and Webhook, a
// SubjectAccessReview webhook with kube's decision cache. Operator Rego
// policies are a mode of package policy.
//
// The attributes of a decision are the SubjectAccessReview's spec itself,
// so that what a caller asked reaches every mode unchanged (the Rego
// policies and the webhook see exactly it).
package authorizer
