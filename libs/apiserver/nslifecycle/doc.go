// Package nslifecycle is kube's NamespaceLifecycle admission, shared by
// the storage services: core and crd both keep objects out of namespaces
// that do not exist or are being terminated, reading namespaces from
// etcd through a store of their own.
package nslifecycle
