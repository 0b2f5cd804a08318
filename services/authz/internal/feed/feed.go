package feed

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/services/authz/internal/rbac"
)

// PolicyLabel marks the ConfigMaps whose data values are Rego policies.
const PolicyLabel = "kplane.dev/authorization-policy"

// ConfigMapSource is the name of the policy source the ConfigMaps feed.
const ConfigMapSource = "configmaps"

// Policies takes the modules of a source.
type Policies interface {
	SetSource(ctx context.Context, source string, modules map[string]string) error
}

// Feed runs the informers. Build it with New, hand Namespaces to whoever
// needs them, then Run it.
type Feed struct {
	index    *rbac.Index
	policies Policies
	changed  func(reason string)
	log      *slog.Logger

	factory    informers.SharedInformerFactory
	cmFactory  informers.SharedInformerFactory
	namespaces corelisters.NamespaceLister
	configMaps corelisters.ConfigMapLister
	// synced is set once every informer has listed and its handler has
	// seen the list.
	synced atomic.Bool
}

// New builds the informers over client: the RBAC kinds and namespaces of
// the whole cluster and the labelled ConfigMaps of policyNamespace.
// changed is called after every change applied.
func New(client kubernetes.Interface, index *rbac.Index, policyNamespace string, changed func(reason string), log *slog.Logger) *Feed {
	f := &Feed{index: index, changed: changed, log: log}
	f.factory = informers.NewSharedInformerFactory(client, 0)
	f.cmFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(policyNamespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = PolicyLabel + "=true" }))
	f.namespaces = f.factory.Core().V1().Namespaces().Lister()
	f.configMaps = f.cmFactory.Core().V1().ConfigMaps().Lister()
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
func (f *Feed) Run(ctx context.Context, policies Policies) error {
	f.policies = policies
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
		{f.cmFactory.Core().V1().ConfigMaps().Informer(), f.configMapHandler(ctx)},
	}
	var synced []cache.InformerSynced
	for _, h := range handlers {
		reg, err := h.informer.AddEventHandler(h.handler)
		if err != nil {
			return fmt.Errorf("register informer handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	f.factory.Start(ctx.Done())
	f.cmFactory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), synced...) {
		f.synced.Store(true)
		f.log.Info("informers synced")
	}
	<-ctx.Done()
	f.factory.Shutdown()
	f.cmFactory.Shutdown()
	return nil
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

// configMapHandler reloads every policy ConfigMap on each change: there
// are few, and the Rego mode compiles them all together anyway.
func (f *Feed) configMapHandler(ctx context.Context) cache.ResourceEventHandler {
	reload := func(any) {
		cms, err := f.configMaps.List(labels.Everything())
		if err != nil {
			f.log.Error("list policy configmaps", "err", err)
			return
		}
		sort.Slice(cms, func(i, j int) bool { return cms[i].Name < cms[j].Name })
		modules := map[string]string{}
		for _, cm := range cms {
			for key, src := range cm.Data {
				modules[fmt.Sprintf("%s/%s/%s/%s", ConfigMapSource, cm.Namespace, cm.Name, key)] = src
			}
		}
		// A compile error is logged by the policies, which keep the last
		// good set; nothing else is to be done until the next change.
		_ = f.policies.SetSource(ctx, ConfigMapSource, modules)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    reload,
		UpdateFunc: func(_, obj any) { reload(obj) },
		DeleteFunc: reload,
	}
}

func reason(resource string, obj any) string {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return resource
	}
	return resource + "/" + key
}
