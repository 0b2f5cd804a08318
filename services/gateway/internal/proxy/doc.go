// Package proxy forwards a request the gateway has authenticated to the
// service that owns it, as kube-aggregator's proxy does: over TLS with the
// gateway's client certificate, with the caller's identity in the front
// proxy headers and every client-supplied identity or impersonation header
// removed. Responses stream back unbuffered (watches, large lists), the
// backend stream ends when the client goes away, and status, headers and
// body pass through untouched.
//
// A Transport spreads requests over the replicas of one backend (every
// address each replica name resolves to, resolved again as replicas come
// and go) and, for idempotent requests, moves on to the next replica when
// a replica cannot be reached before it has answered. Watches go to a
// replica over HTTP/2, everything else over HTTP/1.1, written and read on
// the goroutine of the request being forwarded where its bytes are known
// up front.
package proxy
