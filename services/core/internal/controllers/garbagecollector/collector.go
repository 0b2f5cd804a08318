package garbagecollector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"

	"kplane.dev/services/core/internal/apiclient"
)

// Collector is the garbage collector. Build it with New, then Run it on
// one replica at a time.
type Collector struct {
	clients        *apiclient.Clients
	log            *slog.Logger
	clock          clock.WithTicker
	workers        int
	resyncInterval time.Duration
	syncTimeout    time.Duration
	requestTimeout time.Duration
	ignored        map[schema.GroupResource]struct{}
}

// Option configures a Collector.
type Option func(*Collector)

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(c *Collector) { c.log = l } }

// WithClock sets the clock that paces rediscovery.
func WithClock(cl clock.WithTicker) Option { return func(c *Collector) { c.clock = cl } }

// WithWorkers sets how many objects are worked on at once (default 10).
func WithWorkers(n int) Option { return func(c *Collector) { c.workers = n } }

// WithResyncInterval sets how often resources are discovered again to
// watch new ones and stop watching removed ones (default 30s, as kube).
func WithResyncInterval(d time.Duration) Option { return func(c *Collector) { c.resyncInterval = d } }

// WithSyncTimeout bounds how long workers pause while the informers of
// newly discovered resources list them (default 30s).
func WithSyncTimeout(d time.Duration) Option { return func(c *Collector) { c.syncTimeout = d } }

// WithRequestTimeout bounds each request to the API (default 30s).
func WithRequestTimeout(d time.Duration) Option { return func(c *Collector) { c.requestTimeout = d } }

// WithIgnoredResources replaces the resources left alone (default
// DefaultIgnoredResources).
func WithIgnoredResources(grs ...schema.GroupResource) Option {
	return func(c *Collector) {
		c.ignored = map[schema.GroupResource]struct{}{}
		for _, gr := range grs {
			c.ignored[gr] = struct{}{}
		}
	}
}

// DefaultIgnoredResources are the resources kube's garbage collector
// leaves alone by default: events, in both groups serving them.
func DefaultIgnoredResources() []schema.GroupResource {
	return []schema.GroupResource{{Group: "", Resource: "events"}, {Group: "events.k8s.io", Resource: "events"}}
}

// New returns a collector acting through clients.
func New(clients *apiclient.Clients, opts ...Option) (*Collector, error) {
	c := &Collector{
		clients:        clients,
		log:            slog.New(slog.DiscardHandler),
		clock:          clock.RealClock{},
		workers:        10,
		resyncInterval: 30 * time.Second,
		syncTimeout:    30 * time.Second,
		requestTimeout: 30 * time.Second,
	}
	WithIgnoredResources(DefaultIgnoredResources()...)(c)
	for _, o := range opts {
		o(c)
	}
	var errs []error
	if clients == nil || clients.Metadata == nil || clients.Discovery == nil {
		errs = append(errs, errors.New("metadata and discovery clients are required"))
	}
	if c.log == nil {
		errs = append(errs, errors.New("logger must not be nil"))
	}
	if c.clock == nil {
		errs = append(errs, errors.New("clock must not be nil"))
	}
	if c.workers < 1 {
		errs = append(errs, fmt.Errorf("workers must be at least 1, not %d", c.workers))
	}
	for name, d := range map[string]time.Duration{"resync interval": c.resyncInterval, "sync timeout": c.syncTimeout, "request timeout": c.requestTimeout} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive, not %v", name, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("configure garbage collector: %w", err)
	}
	return c, nil
}

// Run collects garbage until ctx ends, then stops its workers and
// informers and returns. Each Run starts from nothing: the graph is
// rebuilt from the informers, so Run may be called again, on this
// replica or another, after a previous one ended.
func (c *Collector) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := &run{
		c:        c,
		deleteQ:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.UID]()),
		orphanQ:  workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.UID]()),
		monitors: &monitors{c: c, all: map[schema.GroupVersionResource]*monitor{}},
	}
	r.graph = newGraph(r)
	r.monitors.g = r.graph
	var workers sync.WaitGroup
	defer func() {
		cancel()
		r.deleteQ.ShutDown()
		r.orphanQ.ShutDown()
		workers.Wait()
		r.monitors.stopAll()
	}()

	// Workers start once every resource's informer has listed it: before,
	// an owner could look free of blocking dependents not yet seen. Until
	// then a failure is retried after a second, doubling up to the resync
	// interval: core starts before the gateway it discovers through, and
	// a first retry 30 s later left a cascading delete made right after
	// make up undone for that long.
	retry := min(time.Second, c.resyncInterval)
	for !r.initialSync(ctx) {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(retry):
		}
		retry = min(2*retry, c.resyncInterval)
	}
	ticker := c.clock.NewTicker(c.resyncInterval)
	defer ticker.Stop()
	c.log.Info("garbage collector synced; starting workers", "workers", c.workers)
	for range c.workers {
		workers.Add(2)
		go func() {
			defer workers.Done()
			for r.processNext(ctx, r.deleteQ, r.attemptToDeleteItem) {
			}
		}()
		go func() {
			defer workers.Done()
			for r.processNext(ctx, r.orphanQ, r.attemptToOrphanItem) {
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			r.resync(ctx)
		}
	}
}

// run is the state of one Run. Workers hold workerLock for reading while
// they work on an item; resync holds it for writing while new informers
// list their resources. workerLock is taken before graph.mu, never
// while holding it.
type run struct {
	c        *Collector
	graph    *graph
	monitors *monitors
	deleteQ  workqueue.TypedRateLimitingInterface[types.UID]
	orphanQ  workqueue.TypedRateLimitingInterface[types.UID]

	workerLock sync.RWMutex
	mapper     meta.RESTMapper
}

func (r *run) attemptToDelete(uid types.UID) { r.deleteQ.Add(uid) }
func (r *run) attemptToOrphan(uid types.UID) { r.orphanQ.Add(uid) }

// initialSync discovers resources, starts their informers and reports
// whether all of them listed within the sync timeout.
func (r *run) initialSync(ctx context.Context) bool {
	d, err := r.c.discover()
	if err != nil {
		r.c.log.Error("discover resources", "error", err)
		return false
	}
	r.mapper = d.mapper
	r.monitors.sync(ctx, d)
	ctx, cancel := context.WithTimeout(ctx, r.c.syncTimeout)
	defer cancel()
	if err := waitSynced(ctx, r.monitors.list()); err != nil {
		r.c.log.Warn("waiting for informers to list their resources", "error", err)
		return false
	}
	return true
}

// resync discovers resources again and watches new ones, pausing the
// workers until their informers listed them, as kube's periodic Sync.
func (r *run) resync(ctx context.Context) {
	d, err := r.c.discover()
	if err != nil {
		r.c.log.Error("rediscover resources", "error", err)
		return
	}
	r.workerLock.Lock()
	defer r.workerLock.Unlock()
	r.mapper = d.mapper
	started := r.monitors.sync(ctx, d)
	if len(started) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.c.syncTimeout)
	defer cancel()
	if err := waitSynced(ctx, started); err != nil {
		r.c.log.Warn("informers of new resources did not list them in time; resuming", "error", err)
	}
}

// errUnresolvable marks an item no retry can help with.
var errUnresolvable = errors.New("unresolvable")

// processNext works on the next item of q; it returns false once q is
// shut down.
func (r *run) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[types.UID], work func(context.Context, types.UID) error) bool {
	uid, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(uid)
	r.workerLock.RLock()
	err := work(ctx, uid)
	r.workerLock.RUnlock()
	switch {
	case err == nil:
		q.Forget(uid)
	case errors.Is(err, errUnresolvable):
		r.c.log.Warn("leaving object alone", "uid", string(uid), "error", err)
		q.Forget(uid)
	case ctx.Err() != nil:
	case meta.IsNoMatchError(err):
		// An owner of a kind the last discovery did not see: most
		// likely a custom resource whose definition came after it,
		// which the next discovery brings. kube's collector logs this
		// only at its debug level, as here, and retries the same way.
		r.c.log.Debug("owner's kind not discovered yet; will retry", "uid", string(uid), "error", err)
		q.AddRateLimited(uid)
	default:
		r.c.log.Error("collect garbage; will retry", "uid", string(uid), "error", err)
		q.AddRateLimited(uid)
	}
	return true
}
