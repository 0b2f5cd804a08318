package serviceaccount

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
)

// Getter looks up the objects a token refers to. The service implements it
// over its store; errors are API errors (NotFound when the object is gone).
type Getter interface {
	GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error)
	GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	GetNode(ctx context.Context, name string) (*corev1.Node, error)
}

var errInvalidated = errors.New("service account token has been invalidated")

type boundValidator struct {
	getter Getter
	clock  clock.PassiveClock
}

func (v *boundValidator) validate(ctx context.Context, _ string, c *Claims) (*info, error) {
	now := v.clock.Now()
	switch {
	case c.NotBefore != nil && now.Add(Leeway).Before(c.NotBefore.Time):
		return nil, errors.New("service account token is not valid yet")
	case c.Expiry != nil && now.Add(-Leeway).After(c.Expiry.Time):
		return nil, errors.New("service account token has expired")
	case c.IssuedAt != nil && now.Add(Leeway).Before(c.IssuedAt.Time):
		return nil, errors.New("service account token is issued in the future")
	}

	// An object deleted within the leeway still counts: its deletion may
	// not have reached every replica's view yet.
	deletedBefore := now.Add(-Leeway)
	k := c.Kubernetes
	if k == nil {
		k = &KubernetesClaims{}
	}
	ns, saRef := k.Namespace, k.ServiceAccount

	sa, err := v.getter.GetServiceAccount(ctx, ns, saRef.Name)
	if err != nil {
		return nil, err
	}
	if deleted(sa.DeletionTimestamp, deletedBefore) {
		return nil, fmt.Errorf("service account %s/%s has been deleted", ns, saRef.Name)
	}
	if string(sa.UID) != saRef.UID {
		return nil, fmt.Errorf("service account UID (%s) does not match claim (%s)", sa.UID, saRef.UID)
	}

	if ref := k.Secret; ref != nil {
		secret, err := v.getter.GetSecret(ctx, ns, ref.Name)
		if err != nil || deleted(secret.DeletionTimestamp, deletedBefore) {
			return nil, errInvalidated
		}
		if string(secret.UID) != ref.UID {
			return nil, fmt.Errorf("secret UID (%s) does not match service account secret ref claim (%s)", secret.UID, ref.UID)
		}
	}

	out := &info{namespace: ns, name: saRef.Name, uid: saRef.UID}
	if ref := k.Pod; ref != nil {
		pod, err := v.getter.GetPod(ctx, ns, ref.Name)
		if err != nil || deleted(pod.DeletionTimestamp, deletedBefore) {
			return nil, errInvalidated
		}
		if string(pod.UID) != ref.UID {
			return nil, fmt.Errorf("pod UID (%s) does not match service account pod ref claim (%s)", pod.UID, ref.UID)
		}
		out.podName, out.podUID = ref.Name, ref.UID
	}
	if ref := k.Node; ref != nil {
		// A node named only as where the bound pod ran is information, not
		// a binding: kube checks it only when the token is bound to the node.
		if k.Pod == nil {
			node, err := v.getter.GetNode(ctx, ref.Name)
			if err != nil || deleted(node.DeletionTimestamp, deletedBefore) {
				return nil, errInvalidated
			}
			if string(node.UID) != ref.UID {
				return nil, fmt.Errorf("node UID (%s) does not match service account node ref claim (%s)", node.UID, ref.UID)
			}
		}
		out.nodeName, out.nodeUID = ref.Name, ref.UID
	}
	if c.ID != "" {
		out.credentialID = credentialIDOfJTI + c.ID
	}
	return out, nil
}

func deleted(ts *metav1.Time, before time.Time) bool {
	return ts != nil && ts.Time.Before(before)
}

type legacyValidator struct {
	getter Getter
}

func (v *legacyValidator) validate(ctx context.Context, token string, c *Claims) (*info, error) {
	switch {
	case c.Subject == "":
		return nil, errors.New("sub claim is missing")
	case c.LegacyNamespace == "":
		return nil, errors.New("namespace claim is missing")
	case c.LegacySecretName == "":
		return nil, errors.New("secretName claim is missing")
	case c.LegacyServiceAccountName == "":
		return nil, errors.New("serviceAccountName claim is missing")
	case c.LegacyServiceAccountUID == "":
		return nil, errors.New("serviceAccountUID claim is missing")
	}
	ns, name := c.LegacyNamespace, c.LegacyServiceAccountName
	subNS, subName, err := SplitUsername(c.Subject)
	if err != nil || subNS != ns || subName != name {
		return nil, errors.New("sub claim is invalid")
	}

	secret, err := v.getter.GetSecret(ctx, ns, c.LegacySecretName)
	if err != nil || secret.DeletionTimestamp != nil {
		return nil, errors.New("Token has been invalidated") //nolint:staticcheck // kube's text
	}
	if subtle.ConstantTimeCompare(secret.Data[corev1.ServiceAccountTokenKey], []byte(token)) != 1 {
		return nil, errors.New("Token does not match server's copy") //nolint:staticcheck // kube's text
	}
	sa, err := v.getter.GetServiceAccount(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if sa.DeletionTimestamp != nil {
		return nil, fmt.Errorf("ServiceAccount %s/%s has been deleted", ns, name)
	}
	if string(sa.UID) != c.LegacyServiceAccountUID {
		return nil, fmt.Errorf("ServiceAccount UID (%s) does not match claim (%s)", sa.UID, c.LegacyServiceAccountUID)
	}
	return &info{namespace: ns, name: name, uid: c.LegacyServiceAccountUID}, nil
}
