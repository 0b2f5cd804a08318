// Package invalidate tells every gateway replica that authz's decisions
// changed: it publishes proto/authz.SubjectInvalidate (a plain publish, no
// queue group, no reply) after each change, coalescing bursts. A change is
// published at once unless one was published less than MinInterval ago, in
// which case one publish covers every change until MinInterval has passed:
// a burst of a thousand binding updates at start costs about ten
// publishes a second, and no change waits longer than MinInterval, well
// within the second the gateways' caches promise.
package invalidate
