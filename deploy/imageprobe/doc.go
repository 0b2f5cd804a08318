// Command kplane-probe is the health check of the etcd and NATS images,
// which, built FROM scratch, have no shell, curl or client of their own:
// `kplane-probe http://127.0.0.1:2379/health` passes on a 2xx answer, and
// `kplane-probe nats://127.0.0.1:4222` when the server greets a new
// connection with its INFO line, as NATS does before anything else. It is
// not under cmd/ because it is no command of kplane's: make images copies
// it into those two images only.
package main
