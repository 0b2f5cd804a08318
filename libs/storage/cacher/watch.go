package cacher

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/storage"
)

// Watch serves a watch from the cache. "N" replays the held events after N
// (410 Expired when some were dropped; from etcd when the cache listed
// after N and dropped nothing) and follows on; "" and "0"
// start with the current state as ADDED events ("" once the cache has
// caught up with etcd); SendInitialEvents ends the initial events with an
// annotated BOOKMARK.
func (c *Cacher) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if !strings.HasPrefix(prefix, c.prefix) {
		return c.store.Watch(ctx, prefix, opts)
	}
	sendInitial := opts.SendInitialEvents != nil && *opts.SendInitialEvents
	withState := sendInitial || (opts.SendInitialEvents == nil && (opts.ResourceVersion == "" || opts.ResourceVersion == "0"))
	var from int64
	if opts.ResourceVersion == "" {
		rv, err := c.store.CurrentRevision(ctx)
		if err != nil {
			return nil, fmt.Errorf("read current revision for a watch of %s: %w", prefix, err)
		}
		if reached, err := c.waitUntil(ctx, rv); err != nil {
			return nil, err
		} else if !reached {
			// Like kube-apiserver, a watch that must start from the latest
			// state goes to etcd when the cache is behind.
			return c.store.Watch(ctx, prefix, opts)
		}
	} else {
		rv, err := parseRV(prefix, opts.ResourceVersion)
		if err != nil {
			return nil, err
		}
		if err := c.waitFor(ctx, prefix, rv); err != nil {
			if rv == 0 {
				return nil, storage.NewError(storage.ErrCodeUnreachable, prefix, 0, "the watch cache is not ready")
			}
			return nil, err
		}
		from = rv
	}

	w := &watcher{
		c:              c,
		prefix:         prefix,
		match:          opts.Predicate.Matcher(),
		allowBookmarks: opts.AllowBookmarks,
		shared:         opts.Shared,
		result:         make(chan watch.Event),
		stopped:        make(chan struct{}),
		ended:          make(chan struct{}),
		exited:         make(chan struct{}),
	}
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return nil, storage.NewError(storage.ErrCodeUnreachable, prefix, 0, "the watch cache is stopped")
	}
	w.input = make(chan *event, c.watcherBufferLocked())
	w.lastRV = c.st.rv
	w.seen = w.lastRV
	switch {
	case withState:
		below, n := c.st.below(prefix)
		w.initial = make([]*event, 0, n)
		for e := range below {
			w.initial = append(w.initial, &event{typ: watch.Added, key: e.key, obj: e.obj})
		}
		if sendInitial && opts.AllowBookmarks {
			w.initialEnd = c.st.rv
		}
	case opts.ResourceVersion != "":
		events, ok := c.st.since(from, prefix)
		if !ok {
			floor, before := c.st.floor, c.st.floor == c.st.listed
			c.mu.Unlock()
			if before {
				// The cache listed after from and has dropped nothing
				// since: from did not expire here, the cache started
				// later, as a restarted replica's does under a client
				// that watched another. etcd still holds it unless
				// compacted, and answers 410 only then. A revision the
				// cache held and dropped gets 410 from the cache, as
				// kube-apiserver's, so a client that fell behind lists
				// again instead of replaying from etcd.
				return c.store.Watch(ctx, prefix, opts)
			}
			return expiredWatch(from, floor), nil
		}
		w.initial = events
		w.lastRV, w.seen = from, from
	}
	if len(w.initial) == 0 && w.initialEnd == 0 {
		// Nothing to send first: it is live from the start.
		w.phase.Store(live)
	}
	c.watchers[w] = struct{}{}
	c.watcherWG.Add(1)
	c.mu.Unlock()
	go w.run(ctx)
	return w, nil
}

// watcher is one client's watch. Only the cache's dispatcher sends on
// input, and nobody closes it: the watcher's goroutine leaves on stopped
// (the client), ended (the cache) or its context, closing exited and then
// result.
type watcher struct {
	c              *Cacher
	prefix         string
	match          func(runtime.Object) (bool, error)
	allowBookmarks bool
	// shared sends the cached objects themselves (WatchOptions.Shared).
	shared bool

	// initial are delivered before anything from input: the state as ADDED
	// events, or the held events being replayed.
	initial []*event
	// initialEnd is the revision of the annotated BOOKMARK that follows
	// the initial events, 0 for none.
	initialEnd int64
	input      chan *event
	result     chan watch.Event
	// phase is catching, lagging or live; only the dispatcher makes a
	// watcher lagging.
	phase atomic.Int32
	// lastRV is the revision of the last event delivered.
	lastRV int64
	// seen is the revision of the last change the watcher has handled,
	// sent or filtered out, which it skips when it comes again. A bookmark
	// does not count: one can be queued ahead of the change at its own
	// revision.
	seen int64

	stopOnce sync.Once
	stopped  chan struct{}
	endOnce  sync.Once
	ended    chan struct{}
	// expiredAt, set before ended is closed, is the revision the cache
	// jumped to over events it cannot replay; 0 ends the watch silently.
	expiredAt int64
	exited    chan struct{}
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

func (w *watcher) Stop() { w.stopOnce.Do(func() { close(w.stopped) }) }

// end asks the watcher to finish, telling its client with a 410 Expired
// error that it must list again when expiredAt is not 0.
func (w *watcher) end(expiredAt int64) {
	w.endOnce.Do(func() {
		w.expiredAt = expiredAt
		close(w.ended)
	})
}

func (w *watcher) run(ctx context.Context) {
	defer w.c.watcherWG.Done()
	defer close(w.result)
	defer w.c.forget(w)
	defer close(w.exited)

	for _, e := range w.initial {
		w.seen = max(w.seen, e.rv)
		if !w.deliver(ctx, e) {
			w.finish(ctx)
			return
		}
	}
	w.initial = nil
	if w.initialEnd != 0 {
		bookmark := w.bookmark(w.initialEnd, map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		if !w.send(ctx, watch.Event{Type: watch.Bookmark, Object: bookmark}, w.initialEnd) {
			w.finish(ctx)
			return
		}
	}
	if !w.catchUp(ctx) {
		w.finish(ctx)
		return
	}
	for {
		select {
		case e := <-w.input:
			if !w.deliverQueued(ctx, e) {
				w.finish(ctx)
				return
			}
		case <-w.ended:
			w.finish(ctx)
			return
		case <-w.stopped:
			return
		case <-ctx.Done():
			return
		}
	}
}

// Phases of a watcher, as the dispatcher treats it.
const (
	// catching: the watcher still sends what it started with (the state,
	// or the events it replays) or what it missed. A full queue makes it
	// lagging instead of ending it: a watch-list ended before its initial
	// events are out starts them all over, and under a steady load of
	// writes its client would list again and again.
	catching int32 = iota
	// lagging: the dispatcher skips the watcher, which reads what it
	// missed from the history.
	lagging
	// live: every event is queued, and a queue that stays full for the
	// grace period ends the watch, as kube-apiserver ends a watcher that
	// does not keep up.
	live
)

// catchUp sends what was queued while the watcher sent its initial
// events and, while it lagged, what the history holds after the last
// change it handled, round after round, until it has nothing left to catch
// up on; then it is live. It reports false when the watch is over: its
// client left, or the history no longer holds what it missed, for which
// the client gets 410 Expired and lists again.
func (w *watcher) catchUp(ctx context.Context) bool {
	if w.phase.Load() == live {
		return true
	}
	for {
		for drained := false; !drained; {
			select {
			case e := <-w.input:
				if !w.deliverQueued(ctx, e) {
					return false
				}
			default:
				drained = true
			}
		}
		if w.phase.CompareAndSwap(catching, live) {
			return true
		}
		// Every event the dispatcher skipped was in the history before
		// it was skipped. Under the lock no event is added: those after
		// are queued again, and one that comes both ways has a revision
		// already handled.
		w.c.mu.RLock()
		missed, ok := w.c.st.since(w.seen, w.prefix)
		floor := w.c.st.floor
		w.phase.Store(catching)
		w.c.mu.RUnlock()
		if !ok {
			w.end(floor)
			return false
		}
		for _, e := range missed {
			if !w.deliverQueued(ctx, e) {
				return false
			}
		}
	}
}

// deliverQueued delivers an event from the queue or the history: each
// change once, whichever way it came (each has its own revision; the
// cache drops an event at a revision it has applied). A progress
// bookmark read while lagging is dropped: events before its revision
// may have been skipped.
func (w *watcher) deliverQueued(ctx context.Context, e *event) bool {
	if e.typ == watch.Bookmark {
		if w.phase.Load() == lagging {
			return true
		}
		return w.deliver(ctx, e)
	}
	if e.rv <= w.seen {
		return true
	}
	w.seen = e.rv
	return w.deliver(ctx, e)
}

// finish tells the client its watch expired, if the cache ended it for
// that reason, giving a client that does not read a grace period.
func (w *watcher) finish(ctx context.Context) {
	select {
	case <-w.ended:
	default:
		return
	}
	if w.expiredAt == 0 {
		return
	}
	grace := time.NewTimer(w.c.cfg.slowWatcherGrace)
	defer grace.Stop()
	select {
	case w.result <- expiredEvent(w.lastRV, w.expiredAt):
	case <-grace.C:
	case <-w.stopped:
	case <-ctx.Done():
	}
}

// deliver sends the client what e means to it through its selector: a
// change that brings an object into the selection is ADDED, one that takes
// it out is DELETED.
func (w *watcher) deliver(ctx context.Context, e *event) bool {
	if e.typ == watch.Bookmark {
		if !w.allowBookmarks {
			return true
		}
		return w.send(ctx, watch.Event{Type: watch.Bookmark, Object: w.bookmark(e.rv, nil)}, e.rv)
	}
	matches := func(obj runtime.Object) bool {
		ok, err := w.match(obj)
		return err == nil && ok
	}
	if e.typ == watch.Deleted {
		prev := e.prevObj
		if prev == nil {
			prev = e.obj
		}
		if !matches(prev) {
			return true
		}
		return w.send(ctx, watch.Event{Type: watch.Deleted, Object: w.object(e.obj)}, e.rv)
	}
	now := matches(e.obj)
	before := e.prevObj != nil && matches(e.prevObj)
	switch {
	case now && before:
		return w.send(ctx, watch.Event{Type: watch.Modified, Object: w.object(e.obj)}, e.rv)
	case now:
		return w.send(ctx, watch.Event{Type: watch.Added, Object: w.object(e.obj)}, e.rv)
	case before:
		// Like kube-apiserver: the last state the client selected, at the
		// revision of the change that took it out.
		left := e.prevObj.DeepCopyObject()
		if m, err := meta.Accessor(left); err == nil {
			m.SetResourceVersion(strconv.FormatInt(e.rv, 10))
		}
		return w.send(ctx, watch.Event{Type: watch.Deleted, Object: left}, e.rv)
	}
	return true
}

// object is what the client gets of a cached object: a copy of its own
// unless the watch shares the cache's.
func (w *watcher) object(obj runtime.Object) runtime.Object {
	if w.shared {
		return obj
	}
	return obj.DeepCopyObject()
}

func (w *watcher) send(ctx context.Context, ev watch.Event, rv int64) bool {
	select {
	case w.result <- ev:
		if rv > w.lastRV {
			w.lastRV = rv
		}
		return true
	case <-w.ended:
	case <-w.stopped:
	case <-ctx.Done():
	}
	return false
}

// bookmark is an empty object of the resource's kind carrying only rv and
// annotations, like kube-apiserver's bookmarks.
func (w *watcher) bookmark(rv int64, annotations map[string]string) runtime.Object {
	obj := w.c.newObj()
	// Every object the stores hold has metadata; an object without it
	// could not have reached the cache.
	if m, err := meta.Accessor(obj); err == nil {
		m.SetResourceVersion(strconv.FormatInt(rv, 10))
		m.SetAnnotations(annotations)
	}
	return obj
}

func expiredEvent(rv, oldest int64) watch.Event {
	status := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, oldest)).ErrStatus
	return watch.Event{Type: watch.Error, Object: &status}
}

// expiredWatch is a watch that only says that rv is older than the
// history the cache holds.
func expiredWatch(rv, oldest int64) watch.Interface {
	ch := make(chan watch.Event, 1)
	ch <- expiredEvent(rv, oldest)
	close(ch)
	return staticWatch(ch)
}

type staticWatch <-chan watch.Event

func (s staticWatch) ResultChan() <-chan watch.Event { return s }
func (s staticWatch) Stop()                          {}
