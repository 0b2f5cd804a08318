// Package discovery serves the gateway's discovery documents, merged from
// the backends that own each group-version, as kube-aggregator serves
// them: /api, /api/<version>, /apis, /apis/<group>, /apis/<group>/<version>
// and the aggregated apidiscovery.k8s.io documents (v2 and v2beta1, with
// an ETag) on /api and /apis.
//
// A Merger fetches every backend's aggregated and per-group-version
// documents when routes change and periodically, and serves from what it
// last merged, so a request never waits on a backend. A group-version whose
// route is unavailable, or whose backend did not answer the last fetch, is
// left out of every document: the rest keeps being served, so clients keep
// working while one group is down.
package discovery
