// Package openapi builds and serves the OpenAPI documents of a set of
// resource declarations as kube-apiserver publishes them: one OpenAPI v3
// document per group-version under /openapi/v3 (with the index of their
// hashes, what `kubectl explain` reads) and one merged Swagger 2.0 document
// at /openapi/v2.
//
// Each document holds the paths of every verb a resource serves, with
// kube's operation IDs and x-kubernetes-action and
// x-kubernetes-group-version-kind extensions, and the definitions its kinds
// need, taken from the declarations' schemas (resource.Schema) and, for the
// apimachinery types every API uses (Status, DeleteOptions, WatchEvent,
// ObjectMeta...), from the built-in definitions. Serving, hashing and
// caching headers are kube-openapi's own handlers.
package openapi
