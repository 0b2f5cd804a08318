package feed

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/libs/regopolicy"
	"kplane.dev/services/authz/internal/rbac"
)

// PolicyLabel marks the ConfigMaps whose data values are Rego policies.
const PolicyLabel = "kplane.dev/authorization-policy"

// Feed runs the informers. Build it with New, hand Namespaces to whoever
// needs them, then Run it.
type Feed struct {
	index   *rbac.Index
	changed func(reason string)
	log     *slog.Logger

	client          kubernetes.Interface
	policyNamespace string
	factory         informers.SharedInformerFactory
	namespaces      corelisters.NamespaceLister
	// synced is set once every informer has listed and its handler has
	// seen the list.
	synced atomic.Bool
}

// New builds the informers over client: the RBAC kinds and namespaces of
// the whole cluster and the labelled ConfigMaps of policyNamespace.
// changed is called after every change applied.
func New(client kubernetes.Interface, index *rbac.Index, policyNamespace string, changed func(reason string), log *slog.Logger) *Feed {
	f := &Feed{index: index, changed: changed, log: log, client: client, policyNamespace: policyNamespace}
	f.factory = informers.NewSharedInformerFactory(client, 0)
	f.namespaces = f.factory.Core().V1().Namespaces().Lister()
	return f
}

// Namespace returns a namespace from the informer's cache.
func (f *Feed) Namespace(name string) (*corev1.Namespace, bool) {
	ns, err := f.namespaces.Get(name)
	if err != nil {
		return nil, false
	}
	return ns, true
}

// HasSynced says whether every informer has listed once.
func (f *Feed) HasSynced() bool {
	return f.synced.Load()
}

// Run feeds index and policies until ctx ends.
func (f *Feed) Run(ctx context.Context, policies regopolicy.Sink) error {
	cms := regopolicy.NewConfigMaps(policies, f.client, f.policyNamespace, PolicyLabel, f.log)
	rbacInf := f.factory.Rbac().V1()
	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{rbacInf.Roles().Informer(), f.handler("roles", func(obj any) {
			if r, ok := obj.(*rbacv1.Role); ok {
				f.index.SetRole(r)
			}
		}, func(ns, name string) { f.index.DeleteRole(ns, name) })},
		{rbacInf.ClusterRoles().Informer(), f.handler("clusterroles", func(obj any) {
			if r, ok := obj.(*rbacv1.ClusterRole); ok {
				f.index.SetClusterRole(r)
			}
		}, func(_, name string) { f.index.DeleteClusterRole(name) })},
		{rbacInf.RoleBindings().Informer(), f.handler("rolebindings", func(obj any) {
			if b, ok := obj.(*rbacv1.RoleBinding); ok {
				f.index.SetRoleBinding(b)
			}
		}, func(ns, name string) { f.index.DeleteRoleBinding(ns, name) })},
		{rbacInf.ClusterRoleBindings().Informer(), f.handler("clusterrolebindings", func(obj any) {
			if b, ok := obj.(*rbacv1.ClusterRoleBinding); ok {
				f.index.SetClusterRoleBinding(b)
			}
		}, func(_, name string) { f.index.DeleteClusterRoleBinding(name) })},
		{f.factory.Core().V1().Namespaces().Informer(), f.namespaceHandler()},
	}
	synced := []cache.InformerSynced{cms.HasSynced}
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("register informer handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	cmsDone := make(chan error, 1)
	go func() { cmsDone <- cms.Run(ctx) }()
	f.factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		f.synced.Store(true)
		f.log.Info("informers synced")
	}
	<-ctx.Done()
	f.factory.Shutdown()
	return <-cmsDone
}

// handler applies adds and updates with set and deletes with del, then
// reports the change.
func (f *Feed) handler(resource string, set func(obj any), del func(namespace, name string)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			set(obj)
			f.changed(reason(resource, obj))
		},
		UpdateFunc: func(_, obj any) {
			set(obj)
			f.changed(reason(resource, obj))
		},
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				f.log.Warn("deleted object without a key", "resource", resource, "err", err)
				return
			}
			ns, name, err := cache.SplitMetaNamespaceKey(key)
			if err != nil {
				f.log.Warn("deleted object with a bad key", "resource", resource, "key", key, "err", err)
				return
			}
			del(ns, name)
			f.changed(resource + "/" + key)
		},
	}
}

// namespaceHandler reports the namespace changes a policy may see: the
// lister already holds the new state.
func (f *Feed) namespaceHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { f.changed(reason("namespaces", obj)) },
		UpdateFunc: func(oldObj, obj any) {
			o, ok1 := oldObj.(*corev1.Namespace)
			n, ok2 := obj.(*corev1.Namespace)
			if ok1 && ok2 && maps.Equal(o.Labels, n.Labels) && maps.Equal(o.Annotations, n.Annotations) {
				return
			}
			f.changed(reason("namespaces", obj))
		},
		DeleteFunc: func(obj any) {
			key, _ := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			f.changed("namespaces/" + key)
		},
	}
}

func reason(resource string, obj any) string {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return resource
	}
	return resource + "/" + key
}
