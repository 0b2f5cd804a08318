// Package routing keeps the gateway's routing table: which backend serves
// each API group/version. The table is built from APIService objects
// (apiregistration.k8s.io/v1) stored by core and followed with an
// informer. Local APIServices (no spec.service) are the groups core serves
// and route to core; the others route to the URL their service resolves
// to, trusting spec.caBundle or skipping verification when
// spec.insecureSkipTLSVerify says so. At start the table registers the
// built-in group/versions core serves, as kube-aggregator's autoregister
// controller does.
package routing
