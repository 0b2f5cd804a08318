// Package audit defines the audit stream: every audit event the gateway
// writes, in audit.k8s.io/v1 form, on a JetStream stream that outlives
// the gateway, so that other services and outside tools (a SIEM shipper,
// kubectl-style audit viewers) consume it at their own pace.
//
// # Stream and subjects
//
// Stream KPLANE_AUDIT (StreamName) holds the subjects under
// "kplane.audit.>" (StreamSubjects).
//
//	kplane.audit.events.<stage>   one audit.k8s.io/v1 Event in JSON
//
// <stage> is the event's stage (RequestReceived, ResponseStarted,
// ResponseComplete, Panic), so that a consumer interested only in
// completed requests filters "kplane.audit.events.ResponseComplete"
// (Subject builds the names).
//
// Owner: the gateway (services/gateway) publishes every subject above when
// its stream backend is on (--audit-stream), and creates the stream when
// it is missing. Every gateway replica publishes; events of different
// replicas interleave in the order the stream receives them.
//
// Consumers: outside consumers, through durable or ordered consumers of
// their own; no kplane service consumes the stream today. Consumers only
// read: the gateway alone writes it.
//
// # Messages
//
// The payload is one audit.k8s.io/v1 Event (apiVersion and kind set), as
// kube-apiserver's log backend writes it. Header Nats-Msg-Id (HeaderMsgID)
// is "<auditID>/<stage>", so that JetStream drops an event a gateway sends
// twice after a lost acknowledgement. An event the gateway could not hand
// to the stream in time is dropped and counted in the gateway's
// apiserver_audit_error_total{plugin="stream"}, never waited for by the
// request it records.
package audit
