// Package rest serves every Kubernetes verb for one declared resource with
// kube-apiserver's semantics: it decodes and validates requests, applies
// the resource's strategy and patches, calls storage, and writes objects,
// lists, tables and watch streams in the form clients expect. Typed and
// unstructured objects take the same code path.
package rest
