// Package convert converts the objects of a write between the resources
// that serve them, for the webhooks and policies whose matchPolicy
// Equivalent matched the write through another version than the one it
// was made in. Custom resources convert as the crd service converts them,
// with kube's converter built from the CustomResourceDefinition the
// review carries (an apiVersion rewrite, or the CRD's conversion
// webhook); events convert between core/v1 and events.k8s.io/v1 as core
// stores them. No other built-in resource is served in two versions.
package convert
