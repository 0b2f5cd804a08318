// Package routing keeps the gateway's routing table: which backend serves
// each API group/version. The table is built from APIService objects
// (apiregistration.k8s.io/v1) stored by core and followed with an
// informer. Local APIServices (no spec.service) route to core for the
// groups core serves and, when a crd backend is configured, to crd for any
// other group (apiextensions.k8s.io and the custom resources' groups),
// as kube-apiserver hands what it does not serve to its apiextensions
// server (the gateway also sends crd a group no APIService names, so a
// CRD's resources are served before its APIService exists); the others route to the URL their service resolves
// to, trusting spec.caBundle or skipping verification when
// spec.insecureSkipTLSVerify says so. At start the table registers the
// built-in group/versions core and crd serve, as kube-aggregator's autoregister
// controller does.
package routing
