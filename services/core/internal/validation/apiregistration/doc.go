// Package apiregistration holds the create and update rules of
// apiregistration.k8s.io/v1 APIServices as kube-aggregator applies them:
// the name is "<version>.<group>" of the spec, priorities are in range
// for services that are proxied to, local services carry no TLS
// settings, and status conditions have a known status. A new local
// APIService is marked Available, as kube marks it, since nothing has to
// be reached to serve it.
package apiregistration
