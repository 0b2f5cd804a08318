// Package controllers is the work crd's elected leader does on
// CustomResourceDefinitions: the conditions kube maintains
// (NamesAccepted and the accepted names, Established, NonStructuralSchema,
// KubernetesAPIApprovalPolicyConformant) through kube's own controllers
// from k8s.io/apiextensions-apiserver, Established only once the
// gateway's discovery lists the CRD, so that a client that waited for it
// finds the kind at once; the cleanup of a deleted CRD's
// custom resources before its finalizer goes; and the APIServices that
// route each served group-version to crd through the gateway, as kube's
// crd-registration controller keeps them.
package controllers
