// Package metrics is what every kplane service's /metrics starts from: a
// registry of its own (never the global one) with the Go runtime's and
// the process's collectors, and the handler that serves it on the
// service's serving port to clients with a certificate of the service's
// client CA, the rule its other endpoints follow. Health endpoints stay
// open; metrics tell more about a cluster than its health.
package metrics
