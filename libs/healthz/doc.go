// Package healthz serves kube-apiserver's health endpoints (/healthz,
// /livez, /readyz) from named checks, in kube's exact format: "ok", every
// check's line with ?verbose, "[-]<name> failed: reason withheld" and
// "<endpoint> check failed" with 500 on a failure, ?exclude=<name> to skip
// a check, and /<endpoint>/<name> for one check. Probes, `kubectl get --raw
// /readyz?verbose` and operators' scripts read this output, so every
// service answers the same way.
package healthz
