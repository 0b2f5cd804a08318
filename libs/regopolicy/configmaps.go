package regopolicy

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// ConfigMapSource is the name of the source ConfigMaps feed; its modules
// are named ConfigMapSource/<namespace>/<name>/<key>.
const ConfigMapSource = "configmaps"

// ConfigMaps feeds the data values of the ConfigMaps of one namespace that
// carry a label set to "true" to a Sink as the source ConfigMapSource,
// from an informer: every add, update or delete hands all of them over
// again (there are few, and the engine compiles them all together
// anyway).
type ConfigMaps struct {
	sink    Sink
	log     *slog.Logger
	factory informers.SharedInformerFactory
	lister  corelisters.ConfigMapLister
	synced  atomic.Bool
}

// NewConfigMaps returns the feed into sink of the ConfigMaps of namespace
// labelled label=true, read through client; log (nil: none) tells of
// failures.
func NewConfigMaps(sink Sink, client kubernetes.Interface, namespace, label string, log *slog.Logger) *ConfigMaps {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &ConfigMaps{sink: sink, log: log}
	c.factory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = label + "=true" }))
	c.lister = c.factory.Core().V1().ConfigMaps().Lister()
	return c
}

// HasSynced says whether the ConfigMaps were listed and handed over once.
func (c *ConfigMaps) HasSynced() bool { return c.synced.Load() }

// Run follows the ConfigMaps until ctx ends.
func (c *ConfigMaps) Run(ctx context.Context) error {
	reload := func(any) {
		cms, err := c.lister.List(labels.Everything())
		if err != nil {
			c.log.Error("list policy configmaps", "err", err)
			return
		}
		// A compile error is logged by the sink, which keeps the last
		// good set; nothing else is to be done until the next change.
		_ = c.sink.SetSource(ctx, ConfigMapSource, ConfigMapModules(cms))
	}
	reg, err := c.factory.Core().V1().ConfigMaps().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    reload,
		UpdateFunc: func(_, obj any) { reload(obj) },
		DeleteFunc: reload,
	})
	if err != nil {
		return fmt.Errorf("register policy configmap handler: %w", err)
	}
	c.factory.Start(ctx.Done())
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		c.synced.Store(true)
	}
	<-ctx.Done()
	c.factory.Shutdown()
	return nil
}

// ConfigMapModules is the modules cms hold: each data value is a module
// named ConfigMapSource/<namespace>/<name>/<key>.
func ConfigMapModules(cms []*corev1.ConfigMap) map[string]string {
	modules := map[string]string{}
	for _, cm := range cms {
		for key, src := range cm.Data {
			modules[fmt.Sprintf("%s/%s/%s/%s", ConfigMapSource, cm.Namespace, cm.Name, key)] = src
		}
	}
	return modules
}
