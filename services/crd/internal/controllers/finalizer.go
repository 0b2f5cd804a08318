package controllers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"kplane.dev/services/crd/internal/crds"
)

// Finalizer deletes the custom resources of a CRD being deleted, then
// lets the CRD go by removing its cleanup finalizer, as kube's
// CRDFinalizer: the Terminating condition tells how far it got.
type Finalizer struct {
	crds     apiextensionsclient.CustomResourceDefinitionsGetter
	informer apiextensionsinformers.CustomResourceDefinitionInformer
	dynamic  dynamic.Interface
	log      *slog.Logger
	// pollInterval and pollTimeout bound the wait for the custom
	// resources to be gone once deleted (finalizers of their own may
	// hold them).
	pollInterval, pollTimeout time.Duration
}

// NewFinalizer acts on CRDs through crdClient and on their custom
// resources through dyn.
func NewFinalizer(informer apiextensionsinformers.CustomResourceDefinitionInformer, crdClient apiextensionsclient.CustomResourceDefinitionsGetter, dyn dynamic.Interface, log *slog.Logger) *Finalizer {
	return &Finalizer{crds: crdClient, informer: informer, dynamic: dyn, log: log, pollInterval: 100 * time.Millisecond, pollTimeout: time.Minute}
}

// Run cleans up deleted CRDs until ctx ends.
func (f *Finalizer) Run(ctx context.Context) error {
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: "crd_finalizer"})
	defer queue.ShutDown()
	enqueue := func(obj any) {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if ok && crd.DeletionTimestamp != nil && apihelpers.CRDHasFinalizer(crd, crds.CleanupFinalizer) {
			queue.Add(crd.Name)
		}
	}
	reg, err := f.informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	if err != nil {
		return fmt.Errorf("follow CRDs: %w", err)
	}
	defer func() {
		if err := f.informer.Informer().RemoveEventHandler(reg); err != nil {
			f.log.Warn("stop following CRDs for cleanup", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		name, quit := queue.Get()
		if quit {
			return nil
		}
		if err := f.sync(ctx, name); err != nil {
			if ctx.Err() == nil {
				f.log.Warn("clean up CRD", "crd", name, "err", err)
			}
			queue.AddRateLimited(name)
		} else {
			queue.Forget(name)
		}
		queue.Done(name)
	}
}

// sync cleans up one CRD.
func (f *Finalizer) sync(ctx context.Context, name string) error {
	crd, err := f.informer.Lister().Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if crd.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(crd, crds.CleanupFinalizer) {
		return nil
	}
	crd = crd.DeepCopy()
	apihelpers.SetCRDCondition(crd, apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionTrue,
		Reason:  "InstanceDeletionInProgress",
		Message: "CustomResource deletion is in progress",
	})
	crd, err = f.crds.CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// Gone, or changed since the informer saw it (an event
		// queued before the finalizer went still comes): the next
		// event, if any, says what is left to do, as in kube's
		// CRDFinalizer.
		return nil
	}
	if err != nil {
		return fmt.Errorf("mark deletion in progress: %w", err)
	}
	cond := apiextensionsv1.CustomResourceDefinitionCondition{
		Type:    apiextensionsv1.Terminating,
		Status:  apiextensionsv1.ConditionFalse,
		Reason:  "InstanceDeletionCompleted",
		Message: "removed all instances",
	}
	// Objects can be stored only while a version is, or was, the
	// storage version; an established CRD serves at least one version
	// to read them through.
	if apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		if err := f.deleteInstances(ctx, crd); err != nil {
			cond = apiextensionsv1.CustomResourceDefinitionCondition{
				Type:    apiextensionsv1.Terminating,
				Status:  apiextensionsv1.ConditionTrue,
				Reason:  "InstanceDeletionCheck",
				Message: fmt.Sprintf("could not confirm zero CustomResources remaining: %v", err),
			}
		}
	}
	apihelpers.SetCRDCondition(crd, cond)
	if cond.Status == apiextensionsv1.ConditionTrue {
		if _, err := f.crds.CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("report what is left: %w", err)
		}
		return errors.New(cond.Message)
	}
	apihelpers.CRDRemoveFinalizer(crd, crds.CleanupFinalizer)
	if _, err := f.crds.CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove the cleanup finalizer: %w", err)
	}
	return nil
}

// deleteInstances deletes every object of crd, namespace by namespace as
// kube does, and waits until none is left.
func (f *Finalizer) deleteInstances(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	version := servedVersion(crd)
	if version == "" {
		return nil
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Status.AcceptedNames.Plural}
	all := f.dynamic.Resource(gvr)
	list, err := all.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
	}
	namespaces := map[string]bool{}
	for _, item := range list.Items {
		namespaces[item.GetNamespace()] = true
	}
	var errs []error
	for ns := range namespaces {
		var c dynamic.ResourceInterface = all
		if ns != "" {
			c = all.Namespace(ns)
		}
		if err := c.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete %s in %q: %w", gvr.GroupResource(), ns, err))
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return wait.PollUntilContextTimeout(ctx, f.pollInterval, f.pollTimeout, true, func(ctx context.Context) (bool, error) {
		left, err := all.List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, err
		}
		return len(left.Items) == 0, nil
	})
}

// servedVersion is a version of crd its objects can be read through.
func servedVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Served {
			return v.Name
		}
	}
	return ""
}
