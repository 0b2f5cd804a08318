// Package filters holds the gateway's cross-cutting request filters, each
// behaving as kube-apiserver's does: request metrics, ending long-running
// requests at shutdown, the request timeout with the body's read
// deadline, the read-only and mutating max-in-flight limits, a per-user
// limit of long-running requests, and the body size limit; and the
// handlers every kube-apiserver serves besides the API: /healthz, /livez
// and /readyz with named checks, /version and /metrics. A Lifecycle
// drives graceful shutdown: readiness fails first, then long-running
// requests end, then the server waits for the requests in flight.
//
// The filters are echo middleware and must run in this order, outermost
// first (the order is what makes every answer counted, every refused
// request refused before it holds anything, and every limit apply only
// to the work it protects):
//
//  1. Filters.Metrics: outermost after request info and panic recovery,
//     so that the 429, 413 and 504 answers of the filters below are
//     counted, as kube counts its dropped and timed-out requests.
//  2. Filters.EndLongRunningOnShutdown: watches and other long-running
//     requests get a context that Lifecycle.EndLongRunning cancels.
//  3. Filters.Timeout: the deadline covers everything that may wait on
//     the client or on other services, and reading the body fails at it,
//     so that a body trickling in cannot hold a request past it.
//  4. authentication, impersonation and authorization (the spine's):
//     before any limit is taken and any byte of the body read, so that a
//     request that will be refused holds nothing; the limits read the
//     user to let privileged callers through, as kube lets system:masters
//     through.
//  5. Filters.MaxInFlight and Filters.LongRunningPerUser.
//  6. Filters.BodyLimit, next to the proxy (the spine's) it streams the
//     body to.
//
// Health, /version and /metrics are plain handlers; health paths are
// exempt from max-in-flight so that probes get an answer under load.
// The HTTP server must set MaxHeaderBytes.
package filters
