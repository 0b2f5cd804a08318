// Package apifixture serves, for authn's tests, the core/v1 kinds authn
// reads (serviceaccounts, secrets, pods, nodes) from libs' apitest server
// (a real embedded etcd behind kplane's generic API layer over HTTP), so
// the informers authn runs in production are tested against a real API
// server rather than a fake clientset.
package apifixture
