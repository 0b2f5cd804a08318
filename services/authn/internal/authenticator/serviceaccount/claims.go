package serviceaccount

import (
	"errors"
	"time"

	"github.com/golang-jwt/jwt/v5"
	corev1 "k8s.io/api/core/v1"
)

// LegacyIssuer is the issuer of legacy secret-based tokens.
const LegacyIssuer = "kubernetes/serviceaccount"

// Claims is the payload of a ServiceAccount token. A bound token uses the
// registered claims and Kubernetes; a legacy token uses Subject and the
// Legacy* claims.
type Claims struct {
	Issuer    string           `json:"iss,omitempty"`
	Subject   string           `json:"sub,omitempty"`
	Audience  jwt.ClaimStrings `json:"aud,omitempty"`
	Expiry    *jwt.NumericDate `json:"exp,omitempty"`
	NotBefore *jwt.NumericDate `json:"nbf,omitempty"`
	IssuedAt  *jwt.NumericDate `json:"iat,omitempty"`
	ID        string           `json:"jti,omitempty"`

	Kubernetes *KubernetesClaims `json:"kubernetes.io,omitempty"`

	LegacyNamespace          string `json:"kubernetes.io/serviceaccount/namespace,omitempty"`
	LegacySecretName         string `json:"kubernetes.io/serviceaccount/secret.name,omitempty"`
	LegacyServiceAccountName string `json:"kubernetes.io/serviceaccount/service-account.name,omitempty"`
	LegacyServiceAccountUID  string `json:"kubernetes.io/serviceaccount/service-account.uid,omitempty"`
}

// KubernetesClaims is the private kubernetes.io claim of a bound token.
type KubernetesClaims struct {
	Namespace      string           `json:"namespace,omitempty"`
	ServiceAccount Ref              `json:"serviceaccount,omitempty"`
	Pod            *Ref             `json:"pod,omitempty"`
	Secret         *Ref             `json:"secret,omitempty"`
	Node           *Ref             `json:"node,omitempty"`
	WarnAfter      *jwt.NumericDate `json:"warnafter,omitempty"`
}

// Ref names an object and the uid it had when the token was issued.
type Ref struct {
	Name string `json:"name,omitempty"`
	UID  string `json:"uid,omitempty"`
}

// Binding is the object a bound token is bound to: at most one of Pod and
// Secret; Node alone, or with Pod as the node the pod runs on.
type Binding struct {
	Pod    *corev1.Pod
	Secret *corev1.Secret
	Node   *corev1.Node
}

// BoundClaims builds the claims of a bound token for sa, valid from now for
// expiration, for the given audiences, with jti as its credential id.
func BoundClaims(now time.Time, sa *corev1.ServiceAccount, bound Binding, audiences []string, expiration time.Duration, jti string) (*Claims, error) {
	if bound.Pod != nil && bound.Secret != nil {
		return nil, errors.New("internal error, token can only be bound to one object type")
	}
	c := &Claims{
		Subject:   MakeUsername(sa.Namespace, sa.Name),
		Audience:  jwt.ClaimStrings(audiences),
		IssuedAt:  jwt.NewNumericDate(now),
		NotBefore: jwt.NewNumericDate(now),
		Expiry:    jwt.NewNumericDate(now.Add(expiration)),
		ID:        jti,
		Kubernetes: &KubernetesClaims{
			Namespace:      sa.Namespace,
			ServiceAccount: Ref{Name: sa.Name, UID: string(sa.UID)},
		},
	}
	switch {
	case bound.Pod != nil:
		c.Kubernetes.Pod = &Ref{Name: bound.Pod.Name, UID: string(bound.Pod.UID)}
		if bound.Node != nil {
			c.Kubernetes.Node = &Ref{Name: bound.Node.Name, UID: string(bound.Node.UID)}
		}
	case bound.Secret != nil:
		c.Kubernetes.Secret = &Ref{Name: bound.Secret.Name, UID: string(bound.Secret.UID)}
	case bound.Node != nil:
		c.Kubernetes.Node = &Ref{Name: bound.Node.Name, UID: string(bound.Node.UID)}
	}
	return c, nil
}

// LegacyClaims builds the claims of a legacy token stored in secret. Such a
// token never expires; it is valid while the Secret holds it.
func LegacyClaims(sa *corev1.ServiceAccount, secret *corev1.Secret) *Claims {
	return &Claims{
		Subject:                  MakeUsername(sa.Namespace, sa.Name),
		LegacyNamespace:          sa.Namespace,
		LegacySecretName:         secret.Name,
		LegacyServiceAccountName: sa.Name,
		LegacyServiceAccountUID:  string(sa.UID),
	}
}
