// Package events holds events.k8s.io/v1 Events: their conversion to and
// from core/v1 Events, the one form in which both API versions are stored,
// and their strategy, which validates them in that form with kube's strict
// rules for events written through events.k8s.io.
package events
