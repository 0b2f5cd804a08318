package cacher

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/storagemetrics"
)

// ProgressRequester is what the cacher needs of etcd beyond
// storage.Interface to serve consistent reads from memory.
type ProgressRequester interface {
	// CurrentRevision is a linearizable read of etcd's current revision.
	CurrentRevision(ctx context.Context) (int64, error)
	// RequestWatchProgress makes the store's watches opened with
	// AllowBookmarks emit a BOOKMARK at etcd's current revision.
	RequestWatchProgress(ctx context.Context) error
	// Retains reports whether etcd still serves reads at revision rev,
	// which compaction ends.
	Retains(ctx context.Context, rev int64) (bool, error)
}

// Store is the store beneath the cache: etcd3.Store satisfies it.
type Store interface {
	storage.Interface
	ProgressRequester
}

// Option changes a Cacher's configuration.
type Option func(*config)

type config struct {
	history          int
	maxHistory       int
	freshHistory     time.Duration
	waitTimeout      time.Duration
	bookmarkInterval time.Duration
	progressInterval time.Duration
	watcherBuffer    int
	slowWatcherGrace time.Duration
	retryInterval    time.Duration
	logger           *slog.Logger
	metrics          *storagemetrics.Resource
	// etcdReads sends consistent gets and pages to the store.
	etcdReads bool
}

// WithHistory fixes how many recent events the cache keeps for watches
// that resume from a resourceVersion at n; older ones get 410 Expired.
// Without it the cache keeps as kube-apiserver's does: at least 1024, and
// more while the oldest is younger than 75 seconds, up to 102400, so that
// a client that resumes from a revision it was just given finds it even
// after a burst of writes.
func WithHistory(n int) Option {
	return func(c *config) { c.history, c.maxHistory, c.freshHistory = n, n, 0 }
}

// WithGrowingHistory keeps at least initial recent events, and more while
// the oldest is younger than fresh, up to max.
func WithGrowingHistory(initial, max int, fresh time.Duration) Option {
	return func(c *config) { c.history, c.maxHistory, c.freshHistory = initial, max, fresh }
}

// WithWaitTimeout bounds how long a read or watch at resourceVersion N, or
// a consistent read, waits for the cache to reach the revision it needs
// (default 3s).
func WithWaitTimeout(d time.Duration) Option { return func(c *config) { c.waitTimeout = d } }

// WithFallibleDecoding is for a store whose decoding can fail for a reason
// a read must report: a custom resource converted to the version served by
// its conversion webhook. Its cache holds objects converted when they came
// in, so consistent gets and paged lists read etcd, as kube-apiserver 1.32
// does, and a webhook that is down fails them. Without it the cache serves
// them too.
func WithFallibleDecoding() Option { return func(c *config) { c.etcdReads = true } }

// WithBookmarkInterval sets how often watchers that allow bookmarks get one
// (default 1 minute, like kube-apiserver).
func WithBookmarkInterval(d time.Duration) Option {
	return func(c *config) { c.bookmarkInterval = d }
}

// WithProgressRequestInterval sets the progress interval (default 10ms):
// a read waiting for the cache of a resource that had an event within it
// waits that long before asking etcd for a progress notification, and
// asks again every interval; one cache asks at most once an interval.
func WithProgressRequestInterval(d time.Duration) Option {
	return func(c *config) { c.progressInterval = d }
}

// WithWatcherBuffer sets how many events a watcher may have pending before
// it counts as slow (default 100); more while the history has grown (see
// watcherBufferLocked).
func WithWatcherBuffer(n int) Option { return func(c *config) { c.watcherBuffer = n } }

// WithSlowWatcherGrace sets how long one event's delivery waits for slow
// watchers, in total, before ending them (default 250ms).
func WithSlowWatcherGrace(d time.Duration) Option {
	return func(c *config) { c.slowWatcherGrace = d }
}

// WithRetryInterval sets the pause before listing or watching etcd again
// after a failure (default 1s).
func WithRetryInterval(d time.Duration) Option { return func(c *config) { c.retryInterval = d } }

// WithLogger sets where the cache reports failures of its etcd watch.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithMetrics records the cache's objects, revision, events,
// initializations, ended watchers and read waits in m, the metrics of the
// cache's resource.
func WithMetrics(m *storagemetrics.Resource) Option { return func(c *config) { c.metrics = m } }

// Cacher serves one resource from memory. Build it with New and start Run;
// until Run has listed the resource, reads go to the store beneath.
type Cacher struct {
	store  Store
	newObj func() runtime.Object
	prefix string
	cfg    config

	// mu guards st, watchers and stopping. The dispatcher never holds it
	// while it sends to a watcher.
	mu       sync.RWMutex
	st       state
	watchers map[*watcher]struct{}
	stopping bool

	// watcherWG counts watcher goroutines; Run waits for them on its way out.
	watcherWG sync.WaitGroup
	// targets is the dispatcher's scratch list of the watchers of one event.
	targets []*watcher
	// snaps serve the continues of paged lists (see pages.go).
	snaps snapshots
	// progressAt is when the cache last asked etcd for progress (unix
	// nanoseconds).
	progressAt atomic.Int64
}

var _ storage.Interface = (*Cacher)(nil)

// New returns the cache of the objects below prefix (a resource's
// storage.Keys.Prefix) kept in store; newObj returns an empty object of
// the resource's kind, used for bookmarks.
func New(store Store, newObj func() runtime.Object, prefix string, opts ...Option) (*Cacher, error) {
	cfg := config{
		history:          1024,
		maxHistory:       100 * 1024,
		freshHistory:     75 * time.Second,
		waitTimeout:      3 * time.Second,
		bookmarkInterval: time.Minute,
		progressInterval: 10 * time.Millisecond,
		watcherBuffer:    100,
		slowWatcherGrace: 250 * time.Millisecond,
		retryInterval:    time.Second,
		logger:           slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("build cacher: %w", err)
	}
	for name, d := range map[string]time.Duration{
		"wait timeout": cfg.waitTimeout, "bookmark interval": cfg.bookmarkInterval,
		"progress request interval": cfg.progressInterval, "retry interval": cfg.retryInterval,
	} {
		if d <= 0 {
			return nil, fmt.Errorf("build cacher: %s must be positive, got %v", name, d)
		}
	}
	if cfg.history <= 0 || cfg.maxHistory < cfg.history || cfg.freshHistory < 0 || cfg.watcherBuffer <= 0 || cfg.slowWatcherGrace < 0 || cfg.logger == nil {
		return nil, fmt.Errorf("build cacher: history and watcher buffer must be positive, the most history no less than the least, durations not negative, logger set")
	}
	return &Cacher{
		store:    store,
		newObj:   newObj,
		prefix:   prefix,
		cfg:      cfg,
		st:       newState(cfg.history, cfg.maxHistory, cfg.freshHistory),
		watchers: make(map[*watcher]struct{}),
	}, nil
}

// Compact tells the cache that etcd dropped the history before rev, so
// that a watch from an older revision gets 410 Expired from the cache just
// as it would from etcd. Whoever compacts etcd calls it.
func (c *Cacher) Compact(rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// etcd still serves a watch from rev-1: it streams from rev on.
	c.st.floor = max(c.st.floor, rev-1)
}

// Create writes through to the store.
func (c *Cacher) Create(ctx context.Context, key string, obj runtime.Object) (runtime.Object, error) {
	return c.store.Create(ctx, key, obj)
}

// GuaranteedUpdate writes through to the store.
func (c *Cacher) GuaranteedUpdate(ctx context.Context, key string, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc) (runtime.Object, error) {
	if s, ok := c.store.(fromState); ok {
		if cached := c.cached(key); cached != nil {
			return s.GuaranteedUpdateFrom(ctx, key, preconditions, tryUpdate, cached)
		}
	}
	return c.store.GuaranteedUpdate(ctx, key, preconditions, tryUpdate)
}

// Delete writes through to the store.
func (c *Cacher) Delete(ctx context.Context, key string, preconditions *storage.Preconditions, validate storage.ValidateDeletionFunc) (runtime.Object, error) {
	if s, ok := c.store.(fromState); ok {
		if cached := c.cached(key); cached != nil {
			return s.DeleteFrom(ctx, key, preconditions, validate, cached)
		}
	}
	return c.store.Delete(ctx, key, preconditions, validate)
}

// fromState is a store that can start a write from the state the cache
// holds instead of reading it from etcd first, as kube-apiserver's etcd3
// store takes its cache's object: reading and decoding the object again
// was a third of the work of a delete. The store copies the state and
// reads etcd when the write finds it stale.
type fromState interface {
	GuaranteedUpdateFrom(ctx context.Context, key string, preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, suggested runtime.Object) (runtime.Object, error)
	DeleteFrom(ctx context.Context, key string, preconditions *storage.Preconditions, validate storage.ValidateDeletionFunc, suggested runtime.Object) (runtime.Object, error)
}

// cached is the cache's object at key, nil when the cache has none or is
// not ready; it must not be changed.
func (c *Cacher) cached(key string) runtime.Object {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.st.ready {
		return nil
	}
	obj, _ := c.st.get(key)
	return obj
}

// Get reads from the cache once it has the revision asked for, or for the
// latest ("") the revision etcd is at. A miss at "0" is checked with the
// store.
func (c *Cacher) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	if !strings.HasPrefix(key, c.prefix) {
		return c.store.Get(ctx, key, opts)
	}
	if opts.ResourceVersion == "" {
		if c.cfg.etcdReads {
			return c.store.Get(ctx, key, opts)
		}
		return c.consistentGet(ctx, key, opts)
	}
	rv, err := parseRV(key, opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if rv == 0 && !c.ready() {
		return c.store.Get(ctx, key, opts)
	}
	ctx, span := startRead(ctx, "get", key)
	defer span.End()
	if err := c.waitFor(ctx, key, rv); err != nil {
		return nil, err
	}
	c.mu.RLock()
	obj, ok := c.st.get(key)
	c.mu.RUnlock()
	if !ok {
		if rv == 0 {
			// Any revision will do, and etcd's is one: asking it keeps a
			// client that just created the object from being told it is
			// missing because the cache is a few milliseconds behind.
			return c.store.Get(ctx, key, opts)
		}
		return nil, storage.NewError(storage.ErrCodeKeyNotFound, key, 0, "")
	}
	return own(obj, opts), nil
}

// own returns obj, the cache's, to a reader: a copy unless it only reads.
func own(obj runtime.Object, opts storage.GetOptions) runtime.Object {
	if opts.Shared {
		return obj
	}
	return obj.DeepCopyObject()
}

// consistentGet serves a read of the latest state as a consistent list
// is served: from the cache, once it has caught up with the revision etcd
// is at, which it asks first; a cache that cannot catch up in time leaves
// the read to etcd. kube-apiserver reads etcd; decoding what it read was
// the largest part of core's own work for a get.
func (c *Cacher) consistentGet(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	if !c.ready() {
		return c.store.Get(ctx, key, opts)
	}
	ctx, span := startRead(ctx, "get", key)
	defer span.End()
	if reached, err := c.caughtUp(ctx, "get", key); err != nil {
		return nil, err
	} else if !reached {
		return c.store.Get(ctx, key, opts)
	}
	c.mu.RLock()
	obj, ok := c.st.get(key)
	c.mu.RUnlock()
	if !ok {
		return nil, storage.NewError(storage.ErrCodeKeyNotFound, key, 0, "")
	}
	return own(obj, opts), nil
}

// List serves resourceVersion "0", "N" (not older than) and consistent
// ("") reads from the cache, and consistent pages and their continues from
// snapshots of it (pages.go); exact-revision reads, pages at "N", a
// continue whose snapshot is gone, and a consistent read the cache cannot
// catch up with in time go to the store.
func (c *Cacher) List(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if !c.cfg.etcdReads && c.pagedFromCache(prefix, opts) {
		return c.page(ctx, prefix, opts)
	}
	if c.delegateList(prefix, opts) {
		return c.store.List(ctx, prefix, opts)
	}
	ctx, span := startRead(ctx, "list", prefix)
	defer span.End()
	if opts.ResourceVersion == "" {
		if reached, err := c.caughtUp(ctx, "list", prefix); err != nil {
			return nil, err
		} else if !reached {
			return c.store.List(ctx, prefix, opts)
		}
		return c.list(prefix, opts), nil
	}
	rv, err := parseRV(prefix, opts.ResourceVersion)
	if err != nil {
		return nil, err
	}
	if rv == 0 && !c.ready() {
		return c.store.List(ctx, prefix, opts)
	}
	if err := c.waitFor(ctx, prefix, rv); err != nil {
		return nil, err
	}
	return c.list(prefix, opts), nil
}

// delegateList reports whether the cache cannot answer a list that is not
// paged from a snapshot: exact revisions, and pages at a resourceVersion
// other than "0", where the limit may be ignored.
func (c *Cacher) delegateList(prefix string, opts storage.ListOptions) bool {
	switch {
	case !strings.HasPrefix(prefix, c.prefix), opts.Continue != "":
		return true
	case opts.ResourceVersionMatch != "" && opts.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan:
		return true
	case opts.Limit > 0 && opts.ResourceVersion != "0":
		return true
	}
	return false
}

func (c *Cacher) list(prefix string, opts storage.ListOptions) *storage.ListResult {
	c.mu.RLock()
	below, n := c.st.below(prefix)
	matched := make([]runtime.Object, 0, n)
	match := opts.Predicate.Matcher()
	need := requiredLabels(opts.Predicate.Label)
	for e := range below {
		if !e.labels.mayMatch(need) {
			continue
		}
		if ok, err := match(e.obj); err == nil && ok {
			matched = append(matched, e.obj)
		}
	}
	rv := c.st.rv
	c.mu.RUnlock()
	if !opts.Shared {
		for i, obj := range matched {
			matched[i] = obj.DeepCopyObject()
		}
	}
	return &storage.ListResult{Items: matched, ResourceVersion: rv}
}

func (c *Cacher) ready() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.st.ready
}

// caughtUp waits until the cache has reached the revision etcd is at,
// which it reads first, as a consistent read served from memory must;
// false means the cache did not get there in time and the read is etcd's.
func (c *Cacher) caughtUp(ctx context.Context, read, key string) (bool, error) {
	rv, err := c.store.CurrentRevision(ctx)
	if err != nil {
		return false, fmt.Errorf("read current revision for a consistent %s of %s: %w", read, key, err)
	}
	return c.waitUntil(ctx, rv)
}

// waitFor waits until the cache has seen rv, or fails with
// ErrCodeTooLargeResourceVersion.
func (c *Cacher) waitFor(ctx context.Context, key string, rv int64) error {
	reached, err := c.waitUntil(ctx, rv)
	if err != nil || reached {
		return err
	}
	c.mu.RLock()
	current := c.st.rv
	c.mu.RUnlock()
	return storage.NewError(storage.ErrCodeTooLargeResourceVersion, key, current,
		fmt.Sprintf("Too large resource version: %d, current: %d", rv, current))
}

// waitUntil waits up to the wait timeout for the cache to be ready at rv or
// later, asking etcd for progress notifications meanwhile so that an idle
// resource's cache learns that etcd's revision moved on.
//
// A resource that had an event within the progress interval is not asked
// at once: its next event carries a newer revision and comes in a few
// milliseconds, while a progress request makes etcd answer on every watch
// of the stream, each cacher's and the change feed's. A read still
// waiting after the interval asks, and again every interval; the reads
// waiting on one cache share one request per interval (requestProgress).
// Before, every read that found the cache behind asked at once, so under
// a write load etcd answered on every watch at the rate of the reads.
func (c *Cacher) waitUntil(ctx context.Context, rv int64) (bool, error) {
	defer func(start time.Time) { c.cfg.metrics.ReadWait(time.Since(start)) }(time.Now())
	deadline := time.NewTimer(c.cfg.waitTimeout)
	defer deadline.Stop()
	var again *time.Timer
	var againC <-chan time.Time
	for {
		c.mu.RLock()
		current, ready, advanced, lastEvent := c.st.rv, c.st.ready, c.st.advanced, c.st.lastEvent
		c.mu.RUnlock()
		if ready && current >= rv {
			return true, nil
		}
		if ready && again == nil {
			if time.Since(lastEvent) >= c.cfg.progressInterval {
				c.requestProgress(ctx)
			}
			again = time.NewTimer(c.cfg.progressInterval)
			defer again.Stop()
			againC = again.C
		}
		select {
		case <-advanced:
		case <-againC:
			c.requestProgress(ctx)
			again.Reset(c.cfg.progressInterval)
		case <-deadline.C:
			return false, nil
		case <-ctx.Done():
			return false, fmt.Errorf("wait for the cache of %s to reach revision %d: %w", c.prefix, rv, ctx.Err())
		}
	}
}

// requestProgress asks etcd for a progress notification, unless this
// cache asked less than a progress interval ago: that answer is on its
// way to every read waiting.
func (c *Cacher) requestProgress(ctx context.Context) {
	now := time.Now().UnixNano()
	last := c.progressAt.Load()
	if now-last < int64(c.cfg.progressInterval) || !c.progressAt.CompareAndSwap(last, now) {
		return
	}
	if err := c.store.RequestWatchProgress(ctx); err != nil {
		c.cfg.logger.DebugContext(ctx, "request watch progress", "prefix", c.prefix, "error", err)
	}
}

// keyOf is the key the store keeps obj at.
func (c *Cacher) keyOf(obj runtime.Object) (string, int64, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", 0, fmt.Errorf("read metadata of a watched object: %w", err)
	}
	rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("read resourceVersion of watched object %s/%s: %w", m.GetNamespace(), m.GetName(), err)
	}
	if m.GetNamespace() == "" {
		return c.prefix + m.GetName(), rv, nil
	}
	return c.prefix + m.GetNamespace() + "/" + m.GetName(), rv, nil
}

func parseRV(key, s string) (int64, error) {
	rv, err := strconv.ParseInt(s, 10, 64)
	if err != nil || rv < 0 {
		return 0, storage.NewError(storage.ErrCodeInvalidRequest, key, 0, fmt.Sprintf("invalid resourceVersion %q", s))
	}
	return rv, nil
}

// startRead starts the span of a read the cache serves, a child of the
// request's span made by the same provider: the cache needs no tracing of
// its own, and a read outside a traced request costs nothing.
func startRead(ctx context.Context, op, key string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, trace.SpanFromContext(context.Background())
	}
	return parent.TracerProvider().Tracer("kplane.dev/libs/storage/cacher").Start(ctx, "watchcache "+op,
		trace.WithAttributes(attribute.String("kplane.watchcache.key", key)))
}

// maxWatcherBuffer bounds the queue watcherBufferLocked gives a watcher,
// as kube-apiserver bounds a watcher's channel on a resource without
// indexes.
const maxWatcherBuffer = 1024

// watcherBufferLocked is the queue length of a watcher starting now:
// the configured one, or, while the history has grown beyond its least,
// kube-apiserver's estimate of one second of events, the history held
// over the window it keeps fresh, up to 1024. The history grows while
// events arrive faster than they age out of that window. A fixed queue
// of 100 ended a watch-list under a thousand writes a second before its
// initial events were out: the garbage collector's metadata watch of a
// custom resource then listed again and again, each time sending every
// object anew, which took a sixth of crd's CPU. The caller holds c.mu.
func (c *Cacher) watcherBufferLocked() int {
	n := c.cfg.watcherBuffer
	if len(c.st.ring) > c.cfg.history && c.cfg.freshHistory > 0 {
		second := int(math.Ceil(float64(len(c.st.ring)) / c.cfg.freshHistory.Seconds()))
		n = max(n, min(second, maxWatcherBuffer))
	}
	return n
}
