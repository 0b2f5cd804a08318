// Package customresource declares the custom resources a
// CustomResourceDefinition defines, one resource.Resource per served
// version, so that the shared REST layer serves them as kube's
// apiextensions-apiserver does: objects are read and written as
// unstructured JSON, converted between the served and the storage version
// (kube's converter: apiVersion rewrite or a conversion webhook), pruned,
// defaulted on write and on read, validated by the OpenAPI schema, CEL
// rules and embedded metadata with ratcheting on update (all through
// k8s.io/apiextensions-apiserver's library packages), printed with the
// version's additionalPrinterColumns and selected by its selectableFields.
package customresource
