package controller

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"

	"kplane.dev/services/core/internal/apiclient"
)

// DefaultServiceAccount is the ServiceAccount every active namespace has.
const DefaultServiceAccount = "default"

// ServiceAccounts keeps a default ServiceAccount in every active
// namespace, recreating it when deleted, as kube-controller-manager's
// serviceaccount controller.
type ServiceAccounts struct {
	clients *apiclient.Clients
	log     *slog.Logger
	workers int
	base    time.Duration
	limit   time.Duration
}

// ServiceAccountsOption configures ServiceAccounts.
type ServiceAccountsOption func(*ServiceAccounts)

// WithServiceAccountsLogger sets where the controller logs.
func WithServiceAccountsLogger(l *slog.Logger) ServiceAccountsOption {
	return func(s *ServiceAccounts) { s.log = l }
}

// NewServiceAccounts returns the controller acting through clients.
func NewServiceAccounts(clients *apiclient.Clients, opts ...ServiceAccountsOption) *ServiceAccounts {
	s := &ServiceAccounts{clients: clients, log: slog.New(slog.DiscardHandler), workers: 2, base: 100 * time.Millisecond, limit: time.Minute}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Run keeps the default ServiceAccounts until ctx ends.
func (s *ServiceAccounts) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(s.clients.Kube, 10*time.Minute)
	// Only the default ServiceAccounts matter; the cache holds no others.
	saFactory := informers.NewSharedInformerFactoryWithOptions(s.clients.Kube, 10*time.Minute, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", DefaultServiceAccount).String()
	}))
	queue := newQueue("serviceaccounts", s.base, s.limit)
	namespaces := factory.Core().V1().Namespaces()
	accounts := saFactory.Core().V1().ServiceAccounts()
	if _, err := namespaces.Informer().AddEventHandler(enqueue(queue, func(obj any) (string, bool) {
		ns, ok := obj.(*corev1.Namespace)
		return ns.GetName(), ok
	})); err != nil {
		return fmt.Errorf("watch namespaces: %w", err)
	}
	if _, err := accounts.Informer().AddEventHandler(enqueue(queue, func(obj any) (string, bool) {
		sa, ok := obj.(*corev1.ServiceAccount)
		return sa.GetNamespace(), ok
	})); err != nil {
		return fmt.Errorf("watch serviceaccounts: %w", err)
	}
	sync := func(ctx context.Context, ns string) error {
		return s.sync(ctx, namespaces.Lister(), accounts.Lister(), ns)
	}
	saFactory.Start(ctx.Done())
	defer saFactory.Shutdown()
	for typ, ok := range saFactory.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("sync informer of %s", typ)
		}
	}
	return run(ctx, s.log, factory, queue, s.workers, sync)
}

// sync creates the default ServiceAccount of namespace name when the
// namespace is active and has none.
func (s *ServiceAccounts) sync(ctx context.Context, namespaces corelisters.NamespaceLister, accounts corelisters.ServiceAccountLister, name string) error {
	ns, err := namespaces.Get(name)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("read namespace %q: %w", name, err)
	}
	if ns.Status.Phase != corev1.NamespaceActive || ns.DeletionTimestamp != nil {
		return nil
	}
	if _, err := accounts.ServiceAccounts(name).Get(DefaultServiceAccount); err == nil {
		return nil
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DefaultServiceAccount}}
	_, err = s.clients.Kube.CoreV1().ServiceAccounts(name).Create(ctx, sa, metav1.CreateOptions{})
	switch {
	case err == nil, apierrors.IsAlreadyExists(err):
		return nil
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause), apierrors.IsNotFound(err):
		// The namespace went away meanwhile: nothing to keep.
		return nil
	}
	return fmt.Errorf("create the default serviceaccount of %q: %w", name, err)
}
