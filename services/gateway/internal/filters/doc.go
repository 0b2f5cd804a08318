// Package filters holds the gateway's cross-cutting request filters, each
// behaving as kube-apiserver's does: request metrics, ending long-running
// requests at shutdown, the read-only and mutating max-in-flight limits,
// the request timeout, and the body size limit; and the handlers every
// kube-apiserver serves besides the API: /healthz, /livez and /readyz with
// named checks, /version and /metrics. A Lifecycle drives graceful
// shutdown: readiness fails first, then long-running requests end, then
// the server waits for the requests in flight.
//
// The filters are echo middleware and must run in this order, outermost
// first (the order is what makes every answer counted and every limit
// apply only to the work it protects):
//
//  1. Filters.Metrics: outermost after request info and panic recovery,
//     so that the 429, 413 and 504 answers of the filters below are
//     counted, as kube counts its dropped and timed-out requests.
//  2. Filters.EndLongRunningOnShutdown: watches and other long-running
//     requests get a context that Lifecycle.EndLongRunning cancels.
//  3. authentication (the spine's): max-in-flight reads the user to let
//     privileged callers through, as kube lets system:masters through.
//  4. Filters.MaxInFlight.
//  5. Filters.Timeout.
//  6. Filters.BodyLimit: inside the timeout, since it may read a body of
//     unknown length.
//  7. authorization and the proxy (the spine's).
//
// Health, /version and /metrics are plain handlers; health paths are
// exempt from max-in-flight so that probes get an answer under load.
// The HTTP server must set MaxHeaderBytes.
package filters
