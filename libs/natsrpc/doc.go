// Package natsrpc carries kplane's internal reviews (token, access, rules,
// admission) over NATS request-reply, by the protocol proto/rpc defines: a
// Server answers subjects in queue groups, so that adding a replica is only
// starting it, and bounds and drains the work it takes; Request sends one
// request and follows it to its reply.
//
// The protocol tells a requester whether a replica took its request, so a
// request is sent again only when no replica took it — or, for a
// read-only (Idempotent) request, when the replica that took it died — and
// a slow replica is waited for, never asked twice. The requester's deadline
// travels with the request and bounds the replica's work.
//
// Both sides agree on one error encoding, so that an error keeps its
// Kubernetes meaning across the hop: an error reply carries the header
// named by HeaderError with the HTTP status code as its value and a
// meta.k8s.io/v1 Status as its body. A request nobody answers becomes a 503
// ServiceUnavailable, a request that times out a 504 Timeout, a replica
// that is full a 429 TooManyRequests.
//
// An Observer makes one trace of both sides of the hop: the requester's
// client span travels in the request's headers as W3C trace context, and
// the replica serves the request in a server span under it. It also
// measures the requests by subject and outcome, on the requesting side,
// where the wait is felt.
package natsrpc
