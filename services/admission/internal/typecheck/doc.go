// Package typecheck fills the status.typeChecking of
// ValidatingAdmissionPolicies, as kube-controller-manager's
// validatingadmissionpolicy-status-controller does: each new generation of
// a policy is type-checked against the OpenAPI schemas of the kinds it
// matches (read through the API's discovery, so custom resources count
// too), and the warnings are applied to its status with the same field
// manager and observedGeneration.
//
// Every admission replica runs it; a replica applies a policy's status
// only while the generation it sees is newer than the status's, so the
// replicas repeat each other's work at most once per change, with equal
// results.
package typecheck
