package rest

import (
	"context"
	"slices"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
)

// privilegedGroup is kube's system:masters, whose members may do anything
// without asking an authorizer.
const privilegedGroup = "system:masters"

// Authorizer decides whether a user may do what attrs say. The gateway
// authorizes each request's own verb; the REST layer asks an Authorizer
// for what a request does beyond it.
type Authorizer interface {
	Authorize(ctx context.Context, user *authenticationv1.UserInfo, attrs *authorizationv1.ResourceAttributes) (allowed bool, reason string, err error)
}

// WithAuthorizer sets who decides what a request does beyond its verb: a
// PUT or an apply that creates the object it names needs create as well.
// A handler without one lets such writes create, so every server that
// serves users other than its own controllers must set it.
func WithAuthorizer(a Authorizer) Option { return func(h *Handler) { h.authorizer = a } }

// authorizeCreate asks whether the writer of w may create, as kube's update
// and patch handlers do before a write creates the object it updates: the
// gateway authorized only update or patch.
func (h *Handler) authorizeCreate(ctx context.Context, w write) error {
	if h.authorizer == nil {
		return nil
	}
	u := userInfo(ctx)
	if u != nil && slices.Contains(u.Groups, privilegedGroup) {
		return nil
	}
	gvr := h.r.GroupVersionResource
	attrs := &authorizationv1.ResourceAttributes{
		Namespace: w.namespace, Verb: "create", Group: gvr.Group, Version: gvr.Version,
		Resource: gvr.Resource, Subresource: w.subresource, Name: w.name,
	}
	refused := apistatus.Refused{
		Verb: "create", Group: gvr.Group, Resource: gvr.Resource, Subresource: w.subresource,
		Namespace: w.namespace, Name: w.name,
	}
	if u == nil {
		return apistatus.Forbidden(refused, "")
	}
	refused.User = u.Username
	allowed, reason, err := h.authorizer.Authorize(ctx, u, attrs)
	switch {
	case allowed:
		return nil
	case err != nil:
		if _, ok := err.(apierrors.APIStatus); ok {
			return err
		}
		return apierrors.NewInternalError(err)
	}
	return apistatus.Forbidden(refused, reason)
}

// userInfo is who sent the request, as the front proxy authenticated it;
// nil when it did not.
func userInfo(ctx context.Context) *authenticationv1.UserInfo {
	u, ok := frontproxy.UserFrom(ctx)
	if !ok {
		return nil
	}
	extra := make(map[string]authenticationv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	return &authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra}
}
