// Package server is the authn service: it answers TokenReviews and signs
// service account tokens over NATS (proto/authn, one queue group across
// replicas), publishes the service account issuer's discovery document and
// keys, and serves the TokenReview webhook over HTTPS for callers with a
// client certificate, with health and metrics endpoints.
//
// Options (flags) → Validate → Config (files loaded) → New → Run.
package server
