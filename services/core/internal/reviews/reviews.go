package reviews

import (
	"context"
	"fmt"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/proto/authn"
	"kplane.dev/proto/authz"
)

// The resources of this package, by group-version-resource.
var (
	TokenReviews               = authenticationv1.SchemeGroupVersion.WithResource("tokenreviews")
	SelfSubjectReviews         = authenticationv1.SchemeGroupVersion.WithResource("selfsubjectreviews")
	SubjectAccessReviews       = authorizationv1.SchemeGroupVersion.WithResource("subjectaccessreviews")
	SelfSubjectAccessReviews   = authorizationv1.SchemeGroupVersion.WithResource("selfsubjectaccessreviews")
	LocalSubjectAccessReviews  = authorizationv1.SchemeGroupVersion.WithResource("localsubjectaccessreviews")
	SelfSubjectRulesReviews    = authorizationv1.SchemeGroupVersion.WithResource("selfsubjectrulesreviews")
	tokenReviewKind            = authenticationv1.SchemeGroupVersion.WithKind("TokenReview")
	selfSubjectReviewKind      = authenticationv1.SchemeGroupVersion.WithKind("SelfSubjectReview")
	subjectAccessReviewKind    = authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview")
	selfSubjectAccessKind      = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectAccessReview")
	localSubjectAccessKind     = authorizationv1.SchemeGroupVersion.WithKind("LocalSubjectAccessReview")
	selfSubjectRulesReviewKind = authorizationv1.SchemeGroupVersion.WithKind("SelfSubjectRulesReview")
)

// Resources declares the six review resources, answered through rpc. The
// caller sets their Objects and Schema, as for every kind it serves.
func Resources(rpc authzreview.Requester, c clock.PassiveClock) []*resource.Resource {
	create := []string{"create"}
	return []*resource.Resource{
		{GroupVersionResource: TokenReviews, Kind: tokenReviewKind.Kind, Verbs: create, Creater: &tokenReviews{rpc: rpc}},
		{GroupVersionResource: SelfSubjectReviews, Kind: selfSubjectReviewKind.Kind, Verbs: create, Creater: &selfSubjectReviews{clock: c}},
		{GroupVersionResource: SubjectAccessReviews, Kind: subjectAccessReviewKind.Kind, Verbs: create, Creater: &subjectAccessReviews{rpc: rpc}},
		{GroupVersionResource: SelfSubjectAccessReviews, Kind: selfSubjectAccessKind.Kind, Verbs: create, Creater: &selfSubjectAccessReviews{rpc: rpc}},
		{GroupVersionResource: LocalSubjectAccessReviews, Kind: localSubjectAccessKind.Kind, Namespaced: true, Verbs: create, Creater: &localSubjectAccessReviews{rpc: rpc}},
		{GroupVersionResource: SelfSubjectRulesReviews, Kind: selfSubjectRulesReviewKind.Kind, Verbs: create, Creater: &selfSubjectRulesReviews{rpc: rpc}},
	}
}

// AddToScheme registers the kinds of this package.
func AddToScheme(scheme *runtime.Scheme) error {
	if err := authenticationv1.AddToScheme(scheme); err != nil {
		return err
	}
	return authorizationv1.AddToScheme(scheme)
}

// notA is kube's answer to an object of the wrong type.
func notA(kind string, obj runtime.Object) error {
	return apierrors.NewBadRequest(fmt.Sprintf("not a %s: %#v", kind, obj))
}

// caller is the request's identity, as the gateway authenticated it.
func caller(ctx context.Context) (*frontproxy.User, error) {
	u, ok := frontproxy.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewBadRequest("no user present on request")
	}
	return u, nil
}

type tokenReviews struct{ rpc authzreview.Requester }

// Create asks authn about the token, as kube's tokenreview REST: the
// review comes back with its status filled in.
func (r *tokenReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	tr, ok := req.Object.(*authenticationv1.TokenReview)
	if !ok {
		return nil, notA("TokenReview", req.Object)
	}
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	var answer authenticationv1.TokenReview
	if err := r.rpc.RequestJSON(ctx, authn.SubjectTokenReview, tr, &answer); err != nil {
		return nil, err
	}
	tr.Status = answer.Status
	tr.SetGroupVersionKind(tokenReviewKind)
	return tr, nil
}

type selfSubjectReviews struct{ clock clock.PassiveClock }

// Create answers who the caller is, as kube's selfsubjectreview REST,
// which stamps the answer with the time it was made.
func (r *selfSubjectReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	if _, ok := req.Object.(*authenticationv1.SelfSubjectReview); !ok {
		return nil, notA("SelfSubjectReview", req.Object)
	}
	u, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	out := &authenticationv1.SelfSubjectReview{
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(r.clock.Now().Truncate(time.Second))},
		Status: authenticationv1.SelfSubjectReviewStatus{UserInfo: authenticationv1.UserInfo{
			Username: u.Name, UID: u.UID, Groups: u.Groups, Extra: authnExtra(u.Extra),
		}},
	}
	out.SetGroupVersionKind(selfSubjectReviewKind)
	return out, nil
}

func authnExtra(in map[string][]string) map[string]authenticationv1.ExtraValue {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]authenticationv1.ExtraValue, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

type subjectAccessReviews struct{ rpc authzreview.Requester }

// Create answers whether spec's user may do what spec says.
func (r *subjectAccessReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	sar, ok := req.Object.(*authorizationv1.SubjectAccessReview)
	if !ok {
		return nil, notA("SubjectAccessReview", req.Object)
	}
	if errs := ValidateSubjectAccessReview(sar); len(errs) > 0 {
		return nil, apierrors.NewInvalid(invalidKind, "", errs)
	}
	status, err := authzreview.Authorize(ctx, r.rpc, sar.Spec)
	if err != nil {
		return nil, err
	}
	sar.Status = status
	sar.SetGroupVersionKind(subjectAccessReviewKind)
	return sar, nil
}

type selfSubjectAccessReviews struct{ rpc authzreview.Requester }

// Create answers whether the caller may do what spec says
// (kubectl auth can-i).
func (r *selfSubjectAccessReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	ssar, ok := req.Object.(*authorizationv1.SelfSubjectAccessReview)
	if !ok {
		return nil, notA("SelfSubjectAccessReview", req.Object)
	}
	if errs := ValidateSelfSubjectAccessReview(ssar); len(errs) > 0 {
		return nil, apierrors.NewInvalid(invalidKind, "", errs)
	}
	u, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	status, err := authzreview.Authorize(ctx, r.rpc, authorizationv1.SubjectAccessReviewSpec{
		ResourceAttributes:    ssar.Spec.ResourceAttributes,
		NonResourceAttributes: ssar.Spec.NonResourceAttributes,
		User:                  u.Name,
		UID:                   u.UID,
		Groups:                u.Groups,
		Extra:                 authzreview.Extra(u.Extra),
	})
	if err != nil {
		return nil, err
	}
	ssar.Status = status
	ssar.SetGroupVersionKind(selfSubjectAccessKind)
	return ssar, nil
}

type localSubjectAccessReviews struct{ rpc authzreview.Requester }

// Create answers whether spec's user may do what spec says in the
// request's namespace.
func (r *localSubjectAccessReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	lsar, ok := req.Object.(*authorizationv1.LocalSubjectAccessReview)
	if !ok {
		return nil, notA("LocalSubjectAccessReview", req.Object)
	}
	if errs := ValidateLocalSubjectAccessReview(lsar); len(errs) > 0 {
		return nil, apierrors.NewInvalid(invalidKind, "", errs)
	}
	if req.Namespace == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("namespace is required on this type: %v", req.Namespace))
	}
	if req.Namespace != lsar.Namespace {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("spec.resourceAttributes.namespace must match namespace: %v", req.Namespace))
	}
	status, err := authzreview.Authorize(ctx, r.rpc, lsar.Spec)
	if err != nil {
		return nil, err
	}
	lsar.Status = status
	lsar.SetGroupVersionKind(localSubjectAccessKind)
	return lsar, nil
}

type selfSubjectRulesReviews struct{ rpc authzreview.Requester }

// Create lists the rules the caller holds in spec.namespace
// (kubectl auth can-i --list). Kube answers with a new object that
// carries only the status.
func (r *selfSubjectRulesReviews) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	ssrr, ok := req.Object.(*authorizationv1.SelfSubjectRulesReview)
	if !ok {
		return nil, notA("SelfSubjectRulesReview", req.Object)
	}
	u, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if ssrr.Spec.Namespace == "" {
		return nil, apierrors.NewBadRequest("no namespace on request")
	}
	out := &authorizationv1.SelfSubjectRulesReview{}
	q := authz.RulesReview{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra, Namespace: ssrr.Spec.Namespace}
	if err := r.rpc.RequestJSON(ctx, authz.SubjectRulesReview, q, &out.Status); err != nil {
		return nil, err
	}
	out.SetGroupVersionKind(selfSubjectRulesReviewKind)
	return out, nil
}
