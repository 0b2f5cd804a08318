// Package requestinfo parses a request's URL and method into what it asks
// for (verb, API group, version, resource, subresource, namespace, name) by
// kube-apiserver's rules. The gateway authorizes and routes on it; storage
// services dispatch on it, so both read a request the same way: whether a
// GET of a collection is a list or a watch is decided once, by
// ListOptions, and the path's shape (InNamespace, WatchPath, Parts) is
// kept so that a storage service can refuse the shapes kube has no route
// for instead of serving them as something else than what was authorized.
package requestinfo
