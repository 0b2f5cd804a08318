// Package patch applies PATCH request bodies to a resource's objects and
// keeps their metadata.managedFields, with kube-apiserver's semantics: JSON
// patch, JSON merge patch, strategic merge patch (typed objects only) and
// server-side apply, and the Update operations that create, update and
// non-apply patches record for their field manager.
//
// It works on one object in memory; reading and writing storage, admission
// and the resource's strategy are the REST layer's.
package patch
