// Package authn is the contract of the authn service's NATS subjects.
//
// Owner: the authn service answers every subject here, each replica in the
// queue group QueueGroup, so that adding a replica is only starting it.
// Consumers: the gateway (token reviews, issuer documents) and core (token
// requests and TokenReview objects).
//
// Payloads are the JSON of Kubernetes objects where one exists
// (authentication.k8s.io/v1 TokenReview and TokenRequest), so a reply can be
// handed to a client unchanged. A request that cannot be answered gets a
// reply carrying an error instead (see Error and HeaderError).
package authn
