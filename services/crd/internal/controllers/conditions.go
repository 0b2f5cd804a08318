package controllers

import (
	"context"
	"log/slog"

	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/typed/apiextensions/v1"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/apiapproval"
	"k8s.io/apiextensions-apiserver/pkg/controller/establish"
	"k8s.io/apiextensions-apiserver/pkg/controller/nonstructuralschema"
	"k8s.io/apiextensions-apiserver/pkg/controller/status"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Conditions runs kube's CRD condition controllers until ctx ends. The
// informer must be started by the caller. A CRD is established once
// discovered reports it listed, or without waiting when discovered is
// nil.
func Conditions(ctx context.Context, informer apiextensionsinformers.CustomResourceDefinitionInformer, client apiextensionsclient.CustomResourceDefinitionsGetter, discovered Discovered, log *slog.Logger) error {
	logger := klog.FromContext(ctx)
	naming := status.NewNamingConditionController(logger, informer, client)
	establishing := establish.NewEstablishingController(informer, client)
	nonStructural := nonstructuralschema.NewConditionController(informer, client)
	approval := apiapproval.NewKubernetesAPIApprovalPolicyConformantConditionController(informer, client)
	// kube's handler of custom resources queues a CRD whose names were
	// accepted for establishing once it can serve it; here every replica
	// serves it from its own watch of the CRD within milliseconds, and
	// the leader queues it once the gateway's discovery lists it too.
	establish := func(name string) { establishing.QueueCRD(name, 0) }
	var await *awaitDiscovery
	if discovered != nil {
		await = newAwaitDiscovery(informer.Lister(), discovered, establish, log)
		establish = await.add
	}
	queue := func(obj any) {
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || !apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) || apihelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			return
		}
		establish(crd.Name)
	}
	reg, err := informer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    queue,
		UpdateFunc: func(_, obj any) { queue(obj) },
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := informer.Informer().RemoveEventHandler(reg); err != nil {
			log.Warn("stop following CRDs for establishing", "err", err)
		}
	}()
	workers := 4
	done := make(chan struct{}, workers+1)
	if await != nil {
		workers++
		go func() { await.run(ctx); done <- struct{}{} }()
	}
	go func() { naming.RunWithContext(ctx); done <- struct{}{} }()
	go func() { establishing.RunWithContext(ctx); done <- struct{}{} }()
	go func() { nonStructural.RunWithContext(1, ctx); done <- struct{}{} }()
	go func() { approval.RunWithContext(1, ctx); done <- struct{}{} }()
	for range workers {
		<-done
	}
	return nil
}
