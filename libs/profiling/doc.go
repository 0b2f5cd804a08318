// Package profiling serves the Go runtime's profiles (net/http/pprof)
// under /debug/pprof/, as kube-apiserver does with --profiling: CPU,
// heap, allocation, goroutine, block and mutex profiles of a replica
// under load, read before changing code for speed. Who may read them is
// the caller's to decide: the gateway authorizes the paths as
// non-resource URLs, the internal services ask for a client certificate
// of their CA.
package profiling
