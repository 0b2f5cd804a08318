// Package registry keeps what a crd replica serves in step with the
// CustomResourceDefinitions it stores: every served version of each CRD
// whose names were accepted (or that is established) is declared to the
// API server, with its discovery and OpenAPI documents, and dropped when
// the CRD goes or stops serving it. Every replica runs its own registry
// from a watch of the CRDs, so replicas agree within a watch event.
//
// It also answers, as kube's custom resource handler does, that objects of
// a CRD being deleted may no longer be created.
package registry
