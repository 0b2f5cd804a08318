// Package events holds the strategy of events.k8s.io/v1 Events, which
// validates them in the one form both API versions are stored in, core/v1
// (see libs/apiserver/eventconv), with kube's strict rules for events
// written through events.k8s.io.
package events
