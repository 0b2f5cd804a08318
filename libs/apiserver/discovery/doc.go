// Package discovery builds and serves the discovery documents of a set of
// resource declarations exactly as kube-apiserver does: the legacy
// documents (/api, /api/v1, /apis, /apis/<group>, /apis/<group>/<version>)
// and the aggregated apidiscovery.k8s.io/v2 document that clients ask for
// on /api and /apis through their Accept header, with an ETag.
//
// A Set is built from resource.Resource declarations and replaced whole when
// they change (custom resources come and go), so documents are encoded once
// per change and every request serves bytes that are already made.
package discovery
