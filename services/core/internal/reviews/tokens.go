package reviews

import (
	"context"
	"encoding/json"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/proto/authn"
)

// TokenRequestKind is what serviceaccounts/token takes and returns.
var TokenRequestKind = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// TokenRequests answers POST .../serviceaccounts/<name>/token, as kube's
// TokenREST: it checks that the service account and the bound object
// exist, then has authn sign the token.
type TokenRequests struct {
	rpc authzreview.Requester
	// kube reads service accounts and bound objects.
	kube kubernetes.Interface
}

var _ resource.Creater = (*TokenRequests)(nil)

// NewTokenRequests returns the Creater of serviceaccounts/token.
func NewTokenRequests(rpc authzreview.Requester, kube kubernetes.Interface) *TokenRequests {
	return &TokenRequests{rpc: rpc, kube: kube}
}

// Create has authn sign a token for the service account req.Name.
func (t *TokenRequests) Create(ctx context.Context, req *resource.CreateRequest) (runtime.Object, error) {
	tr, ok := req.Object.(*authenticationv1.TokenRequest)
	if !ok {
		return nil, notA("TokenRequest", req.Object)
	}
	gk := TokenRequestKind.GroupKind()
	if tr.Name != "" && tr.Name != req.Name {
		return nil, apierrors.NewInvalid(gk, req.Name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"), tr.Name, "must match the service account name if specified")})
	}
	if tr.Namespace != "" && tr.Namespace != req.Namespace {
		return nil, apierrors.NewInvalid(gk, req.Name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"), tr.Namespace, "must match the service account namespace if specified")})
	}
	sa, err := t.kube.CoreV1().ServiceAccounts(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	tr.Name, tr.Namespace = sa.Name, sa.Namespace
	tr.Status = authenticationv1.TokenRequestStatus{}
	q := authn.TokenRequest{Namespace: sa.Namespace, ServiceAccountName: sa.Name, ServiceAccountUID: string(sa.UID)}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		if q.BoundObject, err = t.boundObject(ctx, req.Namespace, ref); err != nil {
			return nil, err
		}
	}
	tr.SetGroupVersionKind(TokenRequestKind)
	if q.Request, err = json.Marshal(tr); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("encode token request: %w", err))
	}
	out := &authenticationv1.TokenRequest{}
	if err := t.rpc.RequestJSON(ctx, authn.SubjectTokenRequest, q, out); err != nil {
		return nil, err
	}
	out.SetGroupVersionKind(TokenRequestKind)
	return out, nil
}

// boundObject reads the object a token is to be bound to. Kube binds to
// Pods, Nodes and Secrets; kplane serves only Secrets, so a Pod or a Node
// is never found, as in a cluster that has none.
func (t *TokenRequests) boundObject(ctx context.Context, namespace string, ref *authenticationv1.BoundObjectReference) (*authn.BoundObject, error) {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, ref.Name)
	case gvk.Group == "" && gvk.Kind == "Node":
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, ref.Name)
	case gvk.Group == "" && gvk.Kind == "Secret":
		s, err := t.kube.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		uid = s.UID
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && uid != ref.UID {
		return nil, apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return &authn.BoundObject{Kind: gvk.Kind, Name: ref.Name, UID: string(uid)}, nil
}
