// Package authz is the contract of the authz service's NATS subjects.
//
// Owner: the authz service answers the review subjects, each replica in the
// queue group QueueGroup, and publishes SubjectInvalidate. Consumers: the
// gateway (access reviews for every request, invalidations for its decision
// cache) and core (the authorization.k8s.io API and RBAC escalation checks).
//
// Payloads are the JSON of Kubernetes objects where one exists
// (authorization.k8s.io/v1), so a reply can be handed to a client unchanged.
// An error reply carries HeaderError.
package authz
