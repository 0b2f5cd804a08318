// Package options holds the gateway's audit flags, named as
// kube-apiserver's (--audit-policy-file, --audit-log-*,
// --audit-webhook-*) plus --audit-stream-* for the JetStream backend, and
// builds the auditor and its backends from them.
package options
