package feed

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// Feed runs the informers. Build it with New, hand its views to the
// chain's steps, then Run it.
type Feed struct {
	client     kubernetes.Interface
	log        *slog.Logger
	factory    informers.SharedInformerFactory
	mutating   admissionlisters.MutatingWebhookConfigurationLister
	validating admissionlisters.ValidatingWebhookConfigurationLister
	namespaces corelisters.NamespaceLister
	vaps       admissionlisters.ValidatingAdmissionPolicyLister
	vapBinds   admissionlisters.ValidatingAdmissionPolicyBindingLister
	maps       admissionlisters.MutatingAdmissionPolicyLister
	mapBinds   admissionlisters.MutatingAdmissionPolicyBindingLister
	synced     atomic.Bool
}

// New builds the informers over client.
func New(client kubernetes.Interface, log *slog.Logger) *Feed {
	f := &Feed{client: client, log: log, factory: informers.NewSharedInformerFactory(client, 0)}
	ar := f.factory.Admissionregistration().V1()
	f.mutating = ar.MutatingWebhookConfigurations().Lister()
	f.validating = ar.ValidatingWebhookConfigurations().Lister()
	f.vaps = ar.ValidatingAdmissionPolicies().Lister()
	f.vapBinds = ar.ValidatingAdmissionPolicyBindings().Lister()
	f.maps = ar.MutatingAdmissionPolicies().Lister()
	f.mapBinds = ar.MutatingAdmissionPolicyBindings().Lister()
	f.namespaces = f.factory.Core().V1().Namespaces().Lister()
	return f
}

// Run starts the informers and keeps them until ctx ends.
func (f *Feed) Run(ctx context.Context) error {
	f.factory.Start(ctx.Done())
	defer f.factory.Shutdown()
	for typ, ok := range f.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("informer of %v did not sync", typ)
		}
	}
	f.synced.Store(true)
	f.log.Info("admission configuration read")
	<-ctx.Done()
	return nil
}

// HasSynced says whether every informer has listed once.
func (f *Feed) HasSynced() bool { return f.synced.Load() }

// Mutating lists the mutating webhook configurations.
func (f *Feed) Mutating() ([]*admissionregistrationv1.MutatingWebhookConfiguration, error) {
	return f.mutating.List(labels.Everything())
}

// Validating lists the validating webhook configurations.
func (f *Feed) Validating() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	return f.validating.List(labels.Everything())
}

// Get returns a namespace. One created an instant ago may not have
// reached the informer yet; as kube's webhook plugin does, such a miss is
// asked of the API before it counts as missing.
func (f *Feed) Get(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns, err := f.namespaces.Get(name)
	if err == nil || !apierrors.IsNotFound(err) {
		return ns, err
	}
	return f.client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
}

// ValidatingPolicies are the ValidatingAdmissionPolicies and their
// bindings.
func (f *Feed) ValidatingPolicies() ValidatingPolicies { return ValidatingPolicies{f} }

// ValidatingPolicies lists ValidatingAdmissionPolicies and bindings.
type ValidatingPolicies struct{ f *Feed }

// Policies lists the policies.
func (v ValidatingPolicies) Policies() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	return v.f.vaps.List(labels.Everything())
}

// Bindings lists the bindings.
func (v ValidatingPolicies) Bindings() ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	return v.f.vapBinds.List(labels.Everything())
}

// MutatingPolicies are the MutatingAdmissionPolicies and their bindings.
func (f *Feed) MutatingPolicies() MutatingPolicies { return MutatingPolicies{f} }

// MutatingPolicies lists MutatingAdmissionPolicies and bindings.
type MutatingPolicies struct{ f *Feed }

// Policies lists the policies.
func (m MutatingPolicies) Policies() ([]*admissionregistrationv1.MutatingAdmissionPolicy, error) {
	return m.f.maps.List(labels.Everything())
}

// Bindings lists the bindings.
func (m MutatingPolicies) Bindings() ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	return m.f.mapBinds.List(labels.Everything())
}
