// Package audit writes kube's audit events (audit.k8s.io/v1) for the
// requests the gateway serves, as kube-apiserver's audit filters do: an
// Audit-ID for every request, echoed in the response; a policy level per
// request; the stages RequestReceived, ResponseStarted (long-running
// requests), ResponseComplete and Panic; the user and the impersonated
// user, source IPs, user agent, object reference, response status,
// request and response objects at the levels that record them, and the
// annotations of authorization and of admission (which the storage
// services send back in a response header, see
// kplane.dev/libs/apiserver/auditannotation), a mutating webhook's patch
// only at level Request and above.
//
// Events go to backends through a buffer each: a request waits for room
// in a full buffer at most a configured bound, then its event is dropped
// and counted, so that a slow backend never holds up the API. The backends
// themselves (log file, webhook, JetStream) are in package backend.
package audit
