// Package natsrpc carries kplane's internal reviews (token, access, rules,
// admission) over NATS request-reply: a server side that answers a subject
// in a queue group, so that adding a replica is only starting it, and a
// client side that sends one request and waits for one reply.
//
// Both sides agree on one error encoding, so that an error keeps its
// Kubernetes meaning across the hop: an error reply carries the header
// named by HeaderError with the HTTP status code as its value and a
// meta.k8s.io/v1 Status as its body. A request nobody answers becomes a 503
// ServiceUnavailable, a request that times out a 504 Timeout.
package natsrpc
