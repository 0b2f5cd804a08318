// Package tracing is how every kplane service sends OpenTelemetry traces:
// the --tracing-* flags (kube's TracingConfiguration names) and the
// standard OTEL_* environment variables resolved into one Config, the
// Provider built from it, and the W3C trace context propagator every hop
// uses.
//
// A nil *Provider is tracing turned off, and every helper here hands back
// what it was given unchanged for it: a service without an endpoint pays
// no span, no ID generation and no header parsing, rather than the
// smaller but real cost of a no-op SDK on every request. The Provider is
// passed to whatever makes spans rather than installed as a global, so
// that tests and several servers in one process do not share one.
package tracing
