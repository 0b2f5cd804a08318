// Package authzreview is how a storage service asks authz a question over
// NATS (kplane.dev/proto/authz): a Requester that answers 503 without a
// connection, the SubjectAccessReview round trip, and the rest.Authorizer
// that decides what a write does beyond its verb (a write that creates
// needs create). Core and crd both ask through it.
package authzreview
