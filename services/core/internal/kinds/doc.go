// Package kinds declares every resource core serves: names as kube's
// discovery shows them, the columns `kubectl get` prints, selectable
// fields, OpenAPI schemas, typed objects and strategies. It also makes
// events.k8s.io/v1 Events share the storage of core/v1 Events, converting
// on every call, so that both API versions serve the same objects, as
// kube-apiserver does.
package kinds
