// Package namespace holds what makes namespaces behave as kube-apiserver's
// do: the namespace strategy (defaulting, validation, update rules) and the
// NamespaceLifecycle admission that keeps objects out of namespaces that do
// not exist or are being terminated.
package namespace
