package params

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/services/admission/internal/policy/validating"
)

const (
	// syncWait is how long a request waits for a new informer, as kube's.
	syncWait = time.Second
	// directTimeout bounds the direct read of a param the cache lacks, as
	// kube's.
	directTimeout = time.Second
	// resetInterval is the least time between two reads of discovery.
	resetInterval = time.Second
	// idleAfter is how long an informer nobody asks runs on.
	idleAfter = 10 * time.Minute
	// sweepInterval is how often idle informers are looked for.
	sweepInterval = time.Minute
)

// Config is what Params need.
type Config struct {
	// REST reaches the API server that serves the param kinds.
	REST *rest.Config
	// Logger; slog.Default when nil.
	Logger *slog.Logger
}

// mapper maps kinds to resources; Reset forgets what it knew.
type mapper interface {
	RESTMappingWithContext(ctx context.Context, gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error)
	ResetWithContext(ctx context.Context)
}

// Params serve param objects from informers that Run owns. They are safe
// for concurrent use.
type Params struct {
	client dynamic.Interface
	mapper mapper
	logger *slog.Logger
	now    func() time.Time

	// mu guards everything below.
	mu        sync.Mutex
	ctx       context.Context // Run's; nil when not running
	wg        sync.WaitGroup  // the informers' goroutines
	informers map[schema.GroupVersionResource]*informer
	lastReset time.Time
}

var _ validating.Params = (*Params)(nil)

// informer is one resource's informer and what stops it.
type informer struct {
	informers.GenericInformer
	stop     context.CancelFunc
	lastUsed time.Time
}

// New makes Params; they serve nothing until Run.
func New(cfg Config) (*Params, error) {
	if cfg.REST == nil {
		return nil, errors.New("params: no REST config")
	}
	client, err := dynamic.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("params: make dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("params: make discovery client: %w", err)
	}
	m := restmapper.NewDeferredDiscoveryRESTMapperWithContext(memory.NewMemCacheClientWithContext(disco))
	return newParams(client, m, cfg.Logger), nil
}

func newParams(client dynamic.Interface, m mapper, logger *slog.Logger) *Params {
	if logger == nil {
		logger = slog.Default()
	}
	return &Params{client: client, mapper: m, logger: logger, now: time.Now, informers: map[schema.GroupVersionResource]*informer{}}
}

// Run serves params until ctx ends, then stops every informer and waits
// for them.
func (p *Params) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.ctx != nil {
		p.mu.Unlock()
		return errors.New("params: already running")
	}
	ctx, cancel := context.WithCancel(ctx)
	p.ctx = ctx
	p.mu.Unlock()

	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-t.C:
			p.sweep()
		}
	}

	p.mu.Lock()
	cancel()
	p.ctx = nil
	for gvr, inf := range p.informers {
		inf.stop()
		delete(p.informers, gvr)
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// sweep stops the informers nobody asked for a while.
func (p *Params) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for gvr, inf := range p.informers {
		if p.now().Sub(inf.lastUsed) > idleAfter {
			p.logger.Info("stopping idle param informer", "resource", gvr.String())
			inf.stop()
			delete(p.informers, gvr)
		}
	}
}

// mapping maps kind to its resource, reading discovery again when kind
// is not found, at most once a second.
func (p *Params) mapping(ctx context.Context, kind schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := p.mapper.RESTMappingWithContext(ctx, kind.GroupKind(), kind.Version)
	if err != nil && meta.IsNoMatchError(err) {
		p.mu.Lock()
		reset := p.now().Sub(p.lastReset) >= resetInterval
		if reset {
			p.lastReset = p.now()
		}
		p.mu.Unlock()
		if reset {
			p.mapper.ResetWithContext(ctx)
			m, err = p.mapper.RESTMappingWithContext(ctx, kind.GroupKind(), kind.Version)
		}
	}
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("%v: %w", kind, validating.ErrKindUnknown)
	}
	if err != nil {
		return nil, fmt.Errorf("map %v to its resource: %w", kind, err)
	}
	return m, nil
}

// Namespaced says whether objects of kind live in namespaces.
func (p *Params) Namespaced(ctx context.Context, kind schema.GroupVersionKind) (bool, error) {
	m, err := p.mapping(ctx, kind)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// lister returns the synced lister of kind's resource in namespace,
// starting its informer if need be.
func (p *Params) lister(ctx context.Context, kind schema.GroupVersionKind, namespace string) (cache.GenericNamespaceLister, *meta.RESTMapping, error) {
	m, err := p.mapping(ctx, kind)
	if err != nil {
		return nil, nil, err
	}
	p.mu.Lock()
	if p.ctx == nil {
		p.mu.Unlock()
		return nil, nil, fmt.Errorf("%v: params not running: %w", kind, validating.ErrNotSynced)
	}
	inf, ok := p.informers[m.Resource]
	if !ok {
		inf = p.start(m.Resource)
	}
	inf.lastUsed = p.now()
	p.mu.Unlock()

	wait, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !cache.WaitForCacheSync(wait.Done(), inf.Informer().HasSynced) {
		return nil, nil, fmt.Errorf("%v: %w", kind, validating.ErrNotSynced)
	}
	var l cache.GenericNamespaceLister = inf.Lister()
	if namespace != "" {
		l = inf.Lister().ByNamespace(namespace)
	}
	return l, m, nil
}

// start starts gvr's informer under Run's context. p.mu is held.
func (p *Params) start(gvr schema.GroupVersionResource) *informer {
	ctx, stop := context.WithCancel(p.ctx)
	gi := dynamicinformer.NewFilteredDynamicInformer(p.client, gvr, metav1.NamespaceAll, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil)
	inf := &informer{GenericInformer: gi, stop: stop}
	p.informers[gvr] = inf
	p.wg.Go(func() { gi.Informer().RunWithContext(ctx) })
	p.logger.Info("started param informer", "resource", gvr.String())
	return inf
}

// Get returns the object of kind named name in namespace, from the
// informer or, when it has not seen it yet, from the API server.
func (p *Params) Get(ctx context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error) {
	l, m, err := p.lister(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	obj, err := l.Get(name)
	if !apierrors.IsNotFound(err) {
		return obj, err
	}
	// The param may have been created just before the write, ahead of
	// the informer.
	ctx, cancel := context.WithTimeout(ctx, directTimeout)
	defer cancel()
	var r dynamic.ResourceInterface = p.client.Resource(m.Resource)
	if namespace != "" {
		r = p.client.Resource(m.Resource).Namespace(namespace)
	}
	u, err := r.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return u, nil
}

// List returns the objects of kind in namespace that selector selects.
func (p *Params) List(ctx context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error) {
	l, _, err := p.lister(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	return l.List(selector)
}
