// Package apitest starts a storage service built from the generic API
// layer for tests: a real embedded etcd, the watch cache, discovery and
// OpenAPI, serving one typed resource (configmaps) and one unstructured
// resource with a status subresource (widgets.example.com) over real HTTP,
// optionally behind a fault proxy. Tests of the layer and of services
// built on it drive it with client-go and kubectl as they would drive
// kube-apiserver.
package apitest
