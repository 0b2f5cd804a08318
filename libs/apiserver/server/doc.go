// Package server assembles the HTTP server of a storage service: one
// rest.Handler per declared resource behind a single route that reads each
// request's info and finds its handler in a table that can be replaced
// while the server runs (custom resources come and go), the discovery and
// OpenAPI documents of the same resources kept in step with that table,
// and kube's bodies for unknown resources, oversized requests and panics.
// Which store backs a resource is the caller's choice; the server runs the
// stores that need running (watch caches) for as long as it runs. The
// service's own controllers can read those stores in process through
// Metadata, a client-go metadata client that sends them no request.
package server
