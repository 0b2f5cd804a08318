package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
)

// discovered is what one discovery found: the resources to watch (with
// their kinds) and a mapper from owner references' kinds to resources.
type discovered struct {
	resources map[schema.GroupVersionResource]string
	mapper    meta.RESTMapper
	// failed are groups whose discovery failed: their monitors stay as
	// they are until a discovery succeeds.
	failed map[schema.GroupVersion]error
}

// discover lists the preferred version of every resource that supports
// list, watch and delete, as kube's GetDeletableResources, less ignored.
func (c *Collector) discover() (*discovered, error) {
	c.clients.Discovery.Invalidate()
	d := &discovered{resources: map[schema.GroupVersionResource]string{}}
	lists, err := c.clients.Discovery.ServerPreferredResources()
	if err != nil {
		failed, ok := discovery.GroupDiscoveryFailedErrorGroups(err)
		if !ok {
			return nil, fmt.Errorf("discover resources: %w", err)
		}
		d.failed = failed
		c.log.Warn("some groups could not be discovered", "error", err)
	}
	for _, list := range discovery.FilteredBy(discovery.SupportsAllVerbs{Verbs: []string{"delete", "list", "watch"}}, lists) {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			c.log.Warn("ignoring a discovered group version", "groupVersion", list.GroupVersion, "error", err)
			continue
		}
		for _, r := range list.APIResources {
			gvr := gv.WithResource(r.Name)
			if _, ignored := c.ignored[gvr.GroupResource()]; !ignored {
				d.resources[gvr] = r.Kind
			}
		}
	}
	groups, err := restmapper.GetAPIGroupResources(c.clients.Discovery)
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discover kinds: %w", err)
	}
	d.mapper = restmapper.NewDiscoveryRESTMapper(groups)
	return d, nil
}

// monitor is the informer of one resource.
type monitor struct {
	// handled reports when the graph has observed the informer's first
	// list. The informer's own HasSynced turns true as soon as that list
	// is in its store, while the handler may still be queued behind it.
	handled cache.ResourceEventHandlerRegistration
	stop    context.CancelFunc
	done    chan struct{}
}

// monitors run one metadata informer per discovered resource, feeding
// the graph. The owner of monitors is run: it stops them all at the end.
type monitors struct {
	c *Collector
	g *graph

	mu  sync.Mutex
	all map[schema.GroupVersionResource]*monitor
}

// sync starts monitors for resources d found that have none and stops
// those of resources that are gone from a group discovery answered for.
// It returns the monitors it started.
func (ms *monitors) sync(ctx context.Context, d *discovered) []*monitor {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for gvr, m := range ms.all {
		if _, ok := d.resources[gvr]; ok {
			continue
		}
		if _, failed := d.failed[gvr.GroupVersion()]; failed {
			continue
		}
		ms.c.log.Info("stopping monitor of a resource no longer served", "resource", gvr.String())
		m.stop()
		<-m.done
		delete(ms.all, gvr)
	}
	var started []*monitor
	for gvr, kind := range d.resources {
		if _, ok := ms.all[gvr]; ok {
			continue
		}
		m, err := ms.start(ctx, gvr, kind)
		if err != nil {
			ms.c.log.Error("start monitor", "resource", gvr.String(), "error", err)
			continue
		}
		ms.all[gvr] = m
		started = append(started, m)
	}
	return started
}

func (ms *monitors) start(ctx context.Context, gvr schema.GroupVersionResource, kind string) (*monitor, error) {
	inf := metadatainformer.NewFilteredMetadataInformer(ms.c.clients.Metadata, gvr, "", 0, cache.Indexers{}, nil).Informer()
	if err := inf.SetTransform(trim); err != nil {
		return nil, fmt.Errorf("set transform: %w", err)
	}
	observe := func(obj any) {
		m, err := meta.Accessor(obj)
		if err != nil {
			ms.c.log.Error("informer delivered an object without metadata", "resource", gvr.String(), "error", err)
			return
		}
		ms.g.observe(newNode(gvr, kind, m))
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			m, err := meta.Accessor(obj)
			if err != nil {
				ms.c.log.Error("informer deleted an object without metadata", "resource", gvr.String(), "error", err)
				return
			}
			ms.g.forget(m.GetUID())
		},
	})
	if err != nil {
		return nil, fmt.Errorf("add event handler: %w", err)
	}
	ctx, stop := context.WithCancel(ctx)
	m := &monitor{handled: reg, stop: stop, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		inf.RunWithContext(ctx)
	}()
	return m, nil
}

// stopAll stops every monitor and waits for them.
func (ms *monitors) stopAll() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for gvr, m := range ms.all {
		m.stop()
		<-m.done
		delete(ms.all, gvr)
	}
}

// waitSynced waits until every monitor in ms has listed its resource, or
// ctx ends.
func waitSynced(ctx context.Context, ms []*monitor) error {
	synced := make([]cache.InformerSynced, len(ms))
	for i, m := range ms {
		synced[i] = m.handled.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return errors.New("informers did not sync")
	}
	return nil
}

// list returns the running monitors.
func (ms *monitors) list() []*monitor {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	out := make([]*monitor, 0, len(ms.all))
	for _, m := range ms.all {
		out = append(out, m)
	}
	return out
}

// trim drops from an object's metadata what the graph never reads
// (labels, annotations, managedFields and the rest) before the informer
// stores it: the informers hold every object of every resource, and with
// 100,000 ConfigMaps their whole metadata was a sixth of core's heap.
// kube-controller-manager trims its informers' managedFields likewise.
// The object is the informer's own decoded copy, so it is cut in place,
// which also leaves an object already trimmed as it is. Core reads
// custom resources for the collector with apiserver's OwnershipOnly,
// which decodes the same fields: a field kept here is kept there too.
func trim(obj any) (any, error) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj, nil
	}
	m.ObjectMeta = metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp,
		OwnerReferences:   m.OwnerReferences,
		Finalizers:        m.Finalizers,
	}
	return m, nil
}
