package informers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/services/authn/internal/authenticator/bootstrap"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
)

// liveTimeout bounds one live read.
const liveTimeout = 5 * time.Second

// Getter reads what tokens refer to.
type Getter struct {
	client          kubernetes.Interface
	serviceAccounts corelisters.ServiceAccountLister
	secrets         corelisters.SecretLister
	synced          []cache.InformerSynced
}

var (
	_ serviceaccount.Getter  = (*Getter)(nil)
	_ bootstrap.SecretGetter = (*Getter)(nil)
)

// New registers the service account and secret informers with factory; the
// caller starts the factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) *Getter {
	sas := factory.Core().V1().ServiceAccounts()
	secrets := factory.Core().V1().Secrets()
	return &Getter{
		client:          client,
		serviceAccounts: sas.Lister(),
		secrets:         secrets.Lister(),
		synced:          []cache.InformerSynced{sas.Informer().HasSynced, secrets.Informer().HasSynced},
	}
}

// HasSynced reports whether the informers hold a full list.
func (g *Getter) HasSynced() bool {
	for _, s := range g.synced {
		if !s() {
			return false
		}
	}
	return true
}

// GetServiceAccount implements serviceaccount.Getter.
func (g *Getter) GetServiceAccount(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
	sa, err := g.serviceAccounts.ServiceAccounts(namespace).Get(name)
	if !apierrors.IsNotFound(err) {
		return sa, err
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	sa, err = g.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, liveErr(err, "serviceaccount", namespace, name)
	}
	return sa, nil
}

// GetSecret implements serviceaccount.Getter.
func (g *Getter) GetSecret(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	s, err := g.secrets.Secrets(namespace).Get(name)
	if !apierrors.IsNotFound(err) {
		return s, err
	}
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	s, err = g.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, liveErr(err, "secret", namespace, name)
	}
	return s, nil
}

// GetPod implements serviceaccount.Getter.
func (g *Getter) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	p, err := g.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, liveErr(err, "pod", namespace, name)
	}
	return p, nil
}

// GetNode implements serviceaccount.Getter.
func (g *Getter) GetNode(ctx context.Context, name string) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, liveTimeout)
	defer cancel()
	n, err := g.client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, liveErr(err, "node", "", name)
	}
	return n, nil
}

// BootstrapSecrets reads bootstrap token Secrets from the cache only, as
// kube does: a token of the bootstrap form is cheap to forge, and each
// unknown one must not cost a read of the API.
func (g *Getter) BootstrapSecrets() bootstrap.SecretGetter { return cacheOnly{g.secrets} }

type cacheOnly struct{ secrets corelisters.SecretLister }

func (c cacheOnly) GetSecret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	return c.secrets.Secrets(namespace).Get(name)
}

// liveErr keeps API status errors as they are (NotFound must stay
// NotFound) and says what was read otherwise.
func liveErr(err error, kind, namespace, name string) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return fmt.Errorf("read %s %s/%s: %w", kind, namespace, name, err)
}
