// Package apistatus is the one place where errors become Kubernetes API
// statuses: storage errors are translated to API errors in FromStorage, and
// any error is written to the client as a metav1.Status by WriteHTTP (Write
// for echo handlers), which every service's handlers and filters call, so
// that an API error wrapped on its way up keeps its code everywhere.
// NoRoute is kube's answer to a path its router has no route for. Handlers
// return errors; they never format a status body themselves.
package apistatus
