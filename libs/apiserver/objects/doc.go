// Package objects implements resource.Objects for the two shapes kplane
// stores: typed k8s.io/api structs registered in a runtime.Scheme, and
// *unstructured.Unstructured for custom resources. Both encode to the same
// JSON, so a store or handler never branches on which one it holds.
package objects
