// Package requestinfo parses a request's URL and method into what it asks
// for (verb, API group, version, resource, subresource, namespace, name) by
// kube-apiserver's rules. The gateway authorizes and routes on it; storage
// services dispatch on it, so both read a request the same way.
package requestinfo
