// Package eventconv converts between core/v1 Events and events.k8s.io/v1
// Events as kube does. Both API versions serve one stored form, the core
// one: core converts on the way in and out of storage, and admission
// converts a write for the webhooks and policies that name the other
// version under matchPolicy Equivalent.
package eventconv
