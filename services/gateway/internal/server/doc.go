// Package server is the aggregator-gateway process: it serves kplane's
// public HTTPS endpoint on echo, passes every request through one
// explicit, ordered list of filters (panic recovery, request info,
// metrics, the end of long-running requests at shutdown, authentication,
// impersonation, max-in-flight, timeout, body limit, authorization; authn
// and authz are asked over NATS), serves what kube's aggregator serves
// itself (merged discovery and OpenAPI, /version, /healthz, /livez,
// /readyz, /metrics, and the service account issuer's OpenID documents
// from authn), and routes every other request by
// API group/version, from the table of APIService objects, to the backend
// that owns it. An availability controller keeps each APIService's
// Available condition, and the documents follow the table's changes.
package server
