package authz

import "kplane.dev/proto/rpc"

// QueueGroup is the queue group every authz replica subscribes in.
const QueueGroup = "kplane-authz"

// Subjects of authz.
const (
	// SubjectAccessReview takes an authorization.k8s.io/v1
	// SubjectAccessReview and replies with it, status filled in: allowed,
	// denied (an explicit deny, such as an operator policy's) or neither,
	// with the reason kube would give.
	SubjectAccessReview = "kplane.authz.subjectaccessreview"
	// SubjectRulesReview takes a RulesReview and replies with an
	// authorization.k8s.io/v1 SubjectRulesReviewStatus: the rules the user
	// holds in the namespace, as SelfSubjectRulesReview reports them.
	SubjectRulesReview = "kplane.authz.rulesreview"
	// SubjectInvalidate is published (not a request) by every authz
	// replica whenever what it decides on changes: an RBAC object, an
	// operator policy or a namespace an operator policy may read. Every
	// gateway replica subscribes (no queue group) and drops its cached
	// decisions. The payload is an Invalidation.
	SubjectInvalidate = "kplane.authz.invalidate"
)

// AnnotationEveryName, "true" on the reply to a SubjectAccessReview of a
// resource request that names an object, says that the decision and its
// reason would be the same for any other name of the resource: every mode
// asked answered without reading the name (RBAC, when no rule that could
// apply lists resourceNames; operator policies, when none reads it). The
// gateway then keeps one decision for all of the resource's objects
// instead of asking again for each. Without it, the decision is for that
// name alone.
const AnnotationEveryName = "authz.kplane.dev/every-name"

// HeaderError marks an error reply (proto/rpc).
const HeaderError = rpc.HeaderError

// RulesReview asks for the rules a user holds in a namespace.
type RulesReview struct {
	User      string              `json:"user"`
	UID       string              `json:"uid,omitempty"`
	Groups    []string            `json:"groups,omitempty"`
	Extra     map[string][]string `json:"extra,omitempty"`
	Namespace string              `json:"namespace,omitempty"`
}

// Invalidation says why cached decisions are stale.
type Invalidation struct {
	// Reason names what changed, e.g. "clusterrolebindings/admins" or
	// "policy/protect-namespaces.rego"; for logs only.
	Reason string `json:"reason"`
}
