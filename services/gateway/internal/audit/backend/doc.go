// Package backend holds the gateway's audit backends, each an audit.Sink:
// a log file with kube's rotation (--audit-log-*), a webhook that receives
// audit.k8s.io/v1 EventLists as kube-apiserver's webhook backend sends
// them (--audit-webhook-*), and the JetStream stream of
// kplane.dev/proto/audit that other services and tools consume.
package backend
