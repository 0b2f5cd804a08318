// Package auditannotation carries the audit annotations a storage service
// (core, crd) makes while serving a request — those admission webhooks and
// policies return — back to the gateway, which writes the request's audit
// event. In kube-apiserver they go into the audit event in the same
// process; here they travel in a response header of the backend's answer,
// which the gateway reads and removes before the client sees it.
package auditannotation
