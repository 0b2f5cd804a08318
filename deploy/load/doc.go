// Package load measures a Kubernetes API server under load with client-go:
// create, get, update, patch, apply, delete and four kinds of list on
// ConfigMaps in namespaces of its own, a list across every namespace, the
// delay from an update to its delivery to many watchers, and create, get,
// update, list and delete on a custom resource of a CRD it makes. Given two
// servers it measures them in alternating rounds (A, B, B, A, A, B, ...) so that
// drift of a shared machine hits both, and reports per workload the
// medians over rounds of throughput and p50/p99 latency of each side and
// the ratio of their throughputs. Told which processes make up each
// server on this machine, it also samples their memory through the rounds
// (RSS, anonymous memory and PSS, from Linux's /proc). It is the
// yardstick of kplane against a stock kube-apiserver (issue 14).
package load
