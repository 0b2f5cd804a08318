// Package apitest starts a storage service built from the generic API
// layer for tests: a real embedded etcd, the watch cache, discovery and
// OpenAPI, over real HTTP, optionally behind a fault proxy. By default it
// serves one typed resource (configmaps) and one unstructured resource
// with a status subresource (widgets.example.com); a caller may serve its
// own instead, such as kinds of k8s.io/api declared with Typed, so every
// service tests against the same kube-compatible server rather than a fake
// clientset. Tests of the layer and of services built on it drive it with
// client-go and kubectl as they would drive kube-apiserver.
package apitest
