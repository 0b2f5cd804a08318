// Package openapi serves the gateway's OpenAPI documents from the backends
// that own each group-version, as kube-aggregator does: the /openapi/v3
// index lists every available group-version with its owner's hash, a
// /openapi/v3/<group-version> request is proxied to its owner (hash query
// and caching headers passed through), and /openapi/v2 is the merge of the
// backends' Swagger documents, served in JSON or protobuf with an ETag by
// kube-openapi's handler.
//
// The v2 merge is kube-aggregator's, with kube-openapi's aggregator: each
// backend contributes the paths of the group-versions routed to it and the
// definitions those use; a definition several backends publish alike is
// kept once, and one published differently under one name (custom
// resources of different groups may do so) is renamed with a _v2, _v3...
// suffix in the backends merged later, their references with it. Backends
// are merged by descending groupPriorityMinimum, so the preferred group
// keeps the name on every sync.
//
// A Merger fetches the backends' indexes and Swagger documents when routes
// change and periodically; a backend that does not answer is left out
// until it does.
package openapi
