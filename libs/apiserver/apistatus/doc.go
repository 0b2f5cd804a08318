// Package apistatus is the one place where errors become Kubernetes API
// statuses: storage errors are translated to API errors in FromStorage, and
// any error is written to the client as a metav1.Status in Write. Handlers
// return errors; they never format a status body themselves.
package apistatus
