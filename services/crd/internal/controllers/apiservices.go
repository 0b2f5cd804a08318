package controllers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
)

// AutomanagedLabel marks the APIServices a controller keeps, as kube's
// autoregister controller does: "true" for those kept in step with what
// is served (the CRDs' group-versions), "onstart" for those made once.
const AutomanagedLabel = "kube-aggregator.kubernetes.io/automanaged"

// Kube's priorities of a CRD group-version: below every built-in group,
// versions ordered among themselves by kube's version ordering.
const (
	groupPriorityMinimum = 1000
	versionPriority      = 100
)

// resyncInterval bounds how long an APIService changed or deleted by
// someone else stays wrong when no CRD changes.
const resyncInterval = 30 * time.Second

// APIServices keeps one local APIService per group-version that some CRD
// serves, and none for the others, as kube's crd-registration controller
// does; the gateway routes local APIServices of groups core does not
// serve to crd.
type APIServices struct {
	informer apiextensionsinformers.CustomResourceDefinitionInformer
	client   apiregistrationclient.APIServiceInterface
	log      *slog.Logger
}

// NewAPIServices keeps APIServices through client for the CRDs of
// informer.
func NewAPIServices(informer apiextensionsinformers.CustomResourceDefinitionInformer, client apiregistrationclient.APIServiceInterface, log *slog.Logger) *APIServices {
	return &APIServices{informer: informer, client: client, log: log}
}

// Run keeps the APIServices until ctx ends.
func (a *APIServices) Run(ctx context.Context) error {
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	reg, err := a.informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	})
	if err != nil {
		return fmt.Errorf("follow CRDs: %w", err)
	}
	defer func() {
		if err := a.informer.Informer().RemoveEventHandler(reg); err != nil {
			a.log.Warn("stop following CRDs for APIServices", "err", err)
		}
	}()
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.Informer().HasSynced) {
		return nil
	}
	tick := time.NewTicker(resyncInterval)
	defer tick.Stop()
	for {
		if err := a.sync(ctx); err != nil && ctx.Err() == nil {
			a.log.Warn("register the CRDs' group-versions", "err", err)
			// Retry soon: the gateway or core may not be up yet.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			poke()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-tick.C:
		}
	}
}

// sync makes the automanaged APIServices those of the served
// group-versions.
func (a *APIServices) sync(ctx context.Context) error {
	crds, err := a.informer.Lister().List(labels.Everything())
	if err != nil {
		return err
	}
	want := map[string]*apiregistrationv1.APIService{}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv := schema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			want[gv.Version+"."+gv.Group] = apiService(gv)
		}
	}
	have, err := a.client.List(ctx, metav1.ListOptions{LabelSelector: AutomanagedLabel + "=true"})
	if err != nil {
		return fmt.Errorf("list APIServices: %w", err)
	}
	existing := map[string]*apiregistrationv1.APIService{}
	for i := range have.Items {
		existing[have.Items[i].Name] = &have.Items[i]
	}
	for name, s := range want {
		cur, ok := existing[name]
		switch {
		case !ok:
			if _, err := a.client.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("register %s: %w", name, err)
			}
		case cur.Spec.Service != nil || cur.Spec.GroupPriorityMinimum != s.Spec.GroupPriorityMinimum || cur.Spec.VersionPriority != s.Spec.VersionPriority:
			cur = cur.DeepCopy()
			cur.Spec = s.Spec
			if _, err := a.client.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("update %s: %w", name, err)
			}
		}
	}
	for name, cur := range existing {
		if _, ok := want[name]; ok {
			continue
		}
		uid := cur.UID
		if err := a.client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("unregister %s: %w", name, err)
		}
	}
	return nil
}

func apiService(gv schema.GroupVersion) *apiregistrationv1.APIService {
	return &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{
			Name:   gv.Version + "." + gv.Group,
			Labels: map[string]string{AutomanagedLabel: "true"},
		},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                gv.Group,
			Version:              gv.Version,
			GroupPriorityMinimum: groupPriorityMinimum,
			VersionPriority:      versionPriority,
		},
	}
}
