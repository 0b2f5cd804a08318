package authn

import "kplane.dev/proto/rpc"

// QueueGroup is the queue group every authn replica subscribes in.
const QueueGroup = "kplane-authn"

// Subjects answered by authn.
const (
	// SubjectTokenReview takes an authentication.k8s.io/v1 TokenReview
	// (spec.token, spec.audiences) and replies with the same review, its
	// status filled in. An invalid token is a reply with
	// status.authenticated false and status.error set, not an error reply.
	SubjectTokenReview = "kplane.authn.tokenreview"
	// SubjectTokenRequest takes a TokenRequest and replies with an
	// authentication.k8s.io/v1 TokenRequest whose status holds the signed
	// token and its expiry. The caller (core) has checked that the service
	// account and the bound object exist; authn only signs.
	SubjectTokenRequest = "kplane.authn.tokenrequest"
	// SubjectIssuerDiscovery replies with the service account issuer's
	// OpenID Connect discovery document (/.well-known/openid-configuration);
	// the request body is empty.
	SubjectIssuerDiscovery = "kplane.authn.issuer.discovery"
	// SubjectIssuerKeys replies with the issuer's JSON Web Key Set
	// (/openid/v1/jwks); the request body is empty.
	SubjectIssuerKeys = "kplane.authn.issuer.keys"
)

// HeaderError marks an error reply (proto/rpc).
const HeaderError = rpc.HeaderError

// TokenRequest asks authn to sign a bound service account token.
type TokenRequest struct {
	Namespace          string `json:"namespace"`
	ServiceAccountName string `json:"serviceAccountName"`
	ServiceAccountUID  string `json:"serviceAccountUID"`
	// Request is the authentication.k8s.io/v1 TokenRequest as the client
	// sent it. authn defaults and validates it as kube-apiserver does
	// (audiences: its API audiences; expirationSeconds: 3600, at least 600)
	// and answers an invalid one with a 422 error reply.
	Request []byte `json:"request"`
	// BoundObject, when spec.boundObjectRef is set, carries the bound
	// object's identity as read from storage.
	BoundObject *BoundObject `json:"boundObject,omitempty"`
	// NodeName and NodeUID are set when the bound object is a Pod that runs
	// on a node, as kube records them in the token.
	NodeName string `json:"nodeName,omitempty"`
	NodeUID  string `json:"nodeUID,omitempty"`
}

// BoundObject is the object a token is bound to.
type BoundObject struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	UID  string `json:"uid"`
}
