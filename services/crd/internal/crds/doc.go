// Package crds declares apiextensions.k8s.io/v1 CustomResourceDefinitions
// as kube-apiserver serves them: names, columns, the /status subresource,
// and a strategy that defaults, keeps status.storedVersions and validates
// with kube's own rules (k8s.io/apiextensions-apiserver's validation
// package, on the internal types it is written for). Deleting a CRD adds
// the customresourcecleanup finalizer and marks it Terminating, so its
// custom resources are deleted before it goes.
package crds
