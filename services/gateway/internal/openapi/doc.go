// Package openapi serves the gateway's OpenAPI documents from the backends
// that own each group-version, as kube-aggregator does: the /openapi/v3
// index lists every available group-version with its owner's hash, a
// /openapi/v3/<group-version> request is proxied to its owner (hash query
// and caching headers passed through), and /openapi/v2 is the union of the
// backends' Swagger documents, served in JSON or protobuf with an ETag by
// kube-openapi's handler.
//
// A Merger fetches the backends' indexes and Swagger documents when routes
// change and periodically; a backend that does not answer is left out
// until it does.
package openapi
