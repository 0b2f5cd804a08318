// Package resource declares what a storage service serves: for each
// resource its names, scope, verbs, subresources, table columns, OpenAPI
// schema, object type and strategy. The REST layer, discovery and OpenAPI
// are all generated from these declarations, so a resource is described in
// exactly one place.
package resource
