package authzreview

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/authz"
)

// Requester asks authn or authz a question on a subject and decodes the
// answer into out. Its errors are Kubernetes status errors.
type Requester interface {
	RequestJSON(ctx context.Context, subject string, in, out any) error
}

// NATS is a Requester over a NATS connection; a nil connection (a service
// running without --nats-url) answers every question 503
// ServiceUnavailable.
type NATS struct {
	conn    *nats.Conn
	timeout time.Duration
	// observer is nil when the reviews report nothing.
	observer *natsrpc.Observer
}

var _ Requester = (*NATS)(nil)

// NewNATS returns a Requester over nc that waits up to timeout for an
// answer and reports to o (nil: nothing).
func NewNATS(nc *nats.Conn, timeout time.Duration, o *natsrpc.Observer) *NATS {
	return &NATS{conn: nc, timeout: timeout, observer: o}
}

// RequestJSON sends in on subject and decodes the reply into out. Every
// question a storage service asks (token and access reviews, rules,
// token signing) is harmless to ask twice, so one whose replica died is
// asked again.
func (n *NATS) RequestJSON(ctx context.Context, subject string, in, out any) error {
	if n.conn == nil {
		return apierrors.NewServiceUnavailable("authentication and authorization reviews need NATS, and this service runs without --nats-url")
	}
	ctx, cancel := context.WithTimeout(ctx, n.timeout)
	defer cancel()
	return natsrpc.RequestJSON(ctx, n.conn, subject, in, out, natsrpc.Idempotent(), natsrpc.Observe(n.observer))
}

var subjectAccessReviewKind = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")

// Authorize asks authz about spec and returns its status.
func Authorize(ctx context.Context, rpc Requester, spec authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: spec}
	sar.SetGroupVersionKind(subjectAccessReviewKind)
	var answer authorizationv1.SubjectAccessReview
	if err := rpc.RequestJSON(ctx, authz.SubjectAccessReview, sar, &answer); err != nil {
		return authorizationv1.SubjectAccessReviewStatus{}, err
	}
	return answer.Status, nil
}

// Extra is a user's extra as a SubjectAccessReview carries it.
func Extra(in map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// Authorizer asks authz what a request does beyond its own verb (a write
// that creates the object it updates needs create), for the REST layer.
type Authorizer struct{ rpc Requester }

var _ rest.Authorizer = (*Authorizer)(nil)

// NewAuthorizer asks authz through rpc.
func NewAuthorizer(rpc Requester) *Authorizer { return &Authorizer{rpc: rpc} }

// Authorize asks authz whether u may do what attrs say.
func (a *Authorizer) Authorize(ctx context.Context, u *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) (bool, string, error) {
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	status, err := Authorize(ctx, a.rpc, authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes: attrs, User: u.Username, UID: u.UID, Groups: u.Groups, Extra: Extra(extra),
	})
	if err != nil {
		return false, "", err
	}
	return status.Allowed, status.Reason, nil
}

// KubeAuthorizer asks authz through rpc, as kube's authorizer.Authorizer:
// what kube's CEL authorizer library (the authorizer variable of
// admission policies and matchConditions) calls.
type KubeAuthorizer struct{ rpc Requester }

var _ authorizer.Authorizer = (*KubeAuthorizer)(nil)

// NewKubeAuthorizer asks authz through rpc.
func NewKubeAuthorizer(rpc Requester) *KubeAuthorizer { return &KubeAuthorizer{rpc: rpc} }

// Authorize asks authz about attrs; authz's no-opinion is kube's.
func (a *KubeAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{}
	if u := attrs.GetUser(); u != nil {
		spec.User, spec.UID, spec.Groups, spec.Extra = u.GetName(), u.GetUID(), u.GetGroups(), Extra(u.GetExtra())
	}
	if attrs.IsResourceRequest() {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace: attrs.GetNamespace(), Verb: attrs.GetVerb(), Group: attrs.GetAPIGroup(), Version: attrs.GetAPIVersion(),
			Resource: attrs.GetResource(), Subresource: attrs.GetSubresource(), Name: attrs.GetName(),
		}
	} else {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.GetPath(), Verb: attrs.GetVerb()}
	}
	status, err := Authorize(ctx, a.rpc, spec)
	switch {
	case err != nil:
		return authorizer.DecisionNoOpinion, "", err
	case status.Allowed:
		return authorizer.DecisionAllow, status.Reason, nil
	case status.Denied:
		return authorizer.DecisionDeny, status.Reason, nil
	}
	return authorizer.DecisionNoOpinion, status.Reason, nil
}

// ConditionsAwareAuthorize is Authorize: authz's decisions carry no
// conditions.
func (a *KubeAuthorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions fails closed, as kube asks of an authorizer without
// conditions.
func (a *KubeAuthorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}
