// Package namespace holds what makes namespaces behave as kube-apiserver's
// do: the namespace strategy (defaulting, validation, update rules). The
// NamespaceLifecycle admission that keeps objects out of namespaces that do
// not exist or are being terminated is kplane.dev/libs/apiserver/nslifecycle,
// shared with crd.
package namespace
