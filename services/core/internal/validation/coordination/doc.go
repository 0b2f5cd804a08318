// Package coordination holds the strategy of coordination.k8s.io/v1
// Leases, validated with kube-apiserver's rules and messages.
package coordination
