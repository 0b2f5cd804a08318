// Package kubeproto writes objects in Kubernetes' protobuf encoding, as
// kube-apiserver answers clients that ask for
// application/vnd.kubernetes.protobuf (client-go's typed clients and
// informers do): an object is the "k8s\x00" prefix and a runtime.Unknown
// carrying its apiVersion, kind and generated protobuf bytes; a watch
// stream is a sequence of metav1.WatchEvents, each framed by its length,
// whose objects are encoded as single objects are. Only the Go types with
// generated protobuf code (the built-in kinds, metav1's Status and
// PartialObjectMetadata) can be written; custom resources cannot, which
// is why kube-apiserver, and kplane, never offer protobuf for them.
package kubeproto
