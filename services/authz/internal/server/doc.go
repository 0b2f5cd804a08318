// Package server is the authz service as a process: it reads its flags
// (Options), checks them (Validate), loads what they point at (Config),
// and answers SubjectAccessReviews and rules reviews (New, Run).
//
// Reviews arrive over NATS (proto/authz subjects, every replica in one
// queue group, so adding a replica is only starting it) and over HTTPS at
// kube's webhook path, POST /apis/authorization.k8s.io/v1/subjectaccessreviews,
// for callers with a client certificate of --client-ca-file, so that authz
// also serves a real kube-apiserver as its authorization webhook. /metrics
// needs such a certificate too; /healthz, /livez and /readyz need none. A
// replica is ready once its informers have synced and NATS is connected.
//
// Decisions follow --authorization-mode (package authorizer); state comes
// from the API through the gateway with informers (package feed), and each
// change publishes an invalidation (package invalidate).
//
// Shutdown, when Run's context ends: readiness fails, the replica keeps
// serving for --shutdown-delay-duration, the NATS subscriptions drain (so
// reviews in flight are answered and new ones go to the other replicas),
// HTTPS requests in flight finish (up to --shutdown-timeout), background
// work stops and NATS closes.
package server
