package cacher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/storage"
)

var errWatchClosed = errors.New("the store closed the watch")

// Run lists the resource, then follows the store's watch of it, applying
// every change to the cache and handing it to the watchers, until ctx ends.
// Call it once. On its way out it ends every watcher and waits for them.
func (c *Cacher) Run(ctx context.Context) {
	defer c.shutdown()
	listed := false
	for {
		if !listed {
			if err := c.relist(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				c.cfg.logger.WarnContext(ctx, "list for the watch cache", "prefix", c.prefix, "error", err)
				if !c.pause(ctx) {
					return
				}
				continue
			}
			listed = true
		}
		err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if storage.IsExpired(err) {
			// etcd compacted the revision the cache is at: what changed
			// since then is gone, so start over from a list.
			c.cfg.logger.InfoContext(ctx, "watch cache fell behind compaction, listing again", "prefix", c.prefix, "error", err)
			listed = false
			continue
		}
		c.cfg.logger.WarnContext(ctx, "watch for the watch cache ended, watching again", "prefix", c.prefix, "error", err)
		if !c.pause(ctx) {
			return
		}
	}
}

func (c *Cacher) pause(ctx context.Context) bool {
	t := time.NewTimer(c.cfg.retryInterval)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// relist replaces the cache with a consistent list. When the cache moves
// forward over a gap it cannot replay, its watchers are ended with 410
// Expired so that their clients list again, like kube-apiserver's.
func (c *Cacher) relist(ctx context.Context) error {
	res, err := c.store.List(ctx, c.prefix, storage.ListOptions{})
	if err != nil {
		return fmt.Errorf("list %s: %w", c.prefix, err)
	}
	entries := make([]entry, 0, len(res.Items))
	for _, obj := range res.Items {
		key, _, err := c.keyOf(obj)
		if err != nil {
			return fmt.Errorf("list %s: %w", c.prefix, err)
		}
		entries = append(entries, newEntry(key, obj))
	}
	items := newItems(entries)

	c.mu.Lock()
	gap := c.st.ready && res.ResourceVersion != c.st.rv
	var ended []*watcher
	if gap {
		for w := range c.watchers {
			ended = append(ended, w)
		}
		clear(c.watchers)
	}
	c.st.replace(items, res.ResourceVersion)
	c.mu.Unlock()
	c.cfg.metrics.CacheInitialized(res.ResourceVersion)
	c.cfg.metrics.Objects(items.Len())
	for _, w := range ended {
		w.end(res.ResourceVersion)
	}
	return nil
}

// follow watches the store from the cache's revision until the watch ends,
// returning why. An expired revision is an ErrCodeExpired error.
func (c *Cacher) follow(ctx context.Context) error {
	c.mu.RLock()
	from := c.st.rv
	c.mu.RUnlock()
	w, err := c.store.Watch(ctx, c.prefix, storage.WatchOptions{
		ResourceVersion: strconv.FormatInt(from, 10),
		AllowBookmarks:  true,
	})
	if err != nil {
		return fmt.Errorf("watch %s from %d: %w", c.prefix, from, err)
	}
	defer w.Stop()
	bookmarks := time.NewTicker(c.cfg.bookmarkInterval)
	defer bookmarks.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-bookmarks.C:
			c.sendBookmarks()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errWatchClosed
			}
			if err := c.handle(ev); err != nil {
				return err
			}
		}
	}
}

func (c *Cacher) handle(ev watch.Event) error {
	switch ev.Type {
	case watch.Error:
		status := apierrors.FromObject(ev.Object)
		if apierrors.IsResourceExpired(status) || apierrors.IsGone(status) {
			return &storage.Error{Code: storage.ErrCodeExpired, Key: c.prefix, Err: status}
		}
		return fmt.Errorf("watch %s: %w", c.prefix, status)
	case watch.Bookmark:
		m, err := meta.Accessor(ev.Object)
		if err != nil {
			return fmt.Errorf("read bookmark of %s: %w", c.prefix, err)
		}
		rv, err := strconv.ParseInt(m.GetResourceVersion(), 10, 64)
		if err != nil {
			return fmt.Errorf("read bookmark of %s: %w", c.prefix, err)
		}
		c.mu.Lock()
		if rv > c.st.rv {
			c.st.rv = rv
			c.st.signal()
		}
		c.mu.Unlock()
		c.cfg.metrics.CacheRevision(rv)
		return nil
	case watch.Added, watch.Modified, watch.Deleted:
		return c.apply(ev)
	}
	return fmt.Errorf("watch %s: unexpected event type %q", c.prefix, ev.Type)
}

// apply changes the cache by one event and hands the event to the
// watchers whose prefix it is below.
func (c *Cacher) apply(ev watch.Event) error {
	c.cfg.metrics.CacheEventReceived()
	key, rv, err := c.keyOf(ev.Object)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if rv <= c.st.rv {
		// Already applied: a watch resumed over a revision the cache had.
		c.mu.Unlock()
		return nil
	}
	e := &event{typ: ev.Type, key: key, obj: ev.Object, rv: rv, at: time.Now()}
	if ev.Type == watch.Deleted {
		e.prevObj = c.st.remove(key)
	} else {
		e.prevObj = c.st.upsert(key, ev.Object)
		// The cache, not etcd's event, knows whether the object is new to
		// it: after a list, etcd may repeat an ADDED as a change.
		e.typ = watch.Modified
		if e.prevObj == nil {
			e.typ = watch.Added
		}
	}
	c.st.push(e)
	c.st.rv = rv
	c.st.lastEvent = e.at
	c.st.signal()
	c.targets = c.targets[:0]
	for w := range c.watchers {
		if strings.HasPrefix(key, w.prefix) {
			c.targets = append(c.targets, w)
		}
	}
	objects := c.st.items.Len()
	c.mu.Unlock()
	c.cfg.metrics.Objects(objects)
	c.cfg.metrics.CacheRevision(rv)
	c.dispatch(e)
	c.cfg.metrics.CacheEventDispatched()
	return nil
}

// dispatch queues e for c.targets. A live watcher whose queue stays full
// for the grace period (shared by all slow watchers of this event) is
// ended rather than allowed to hold back everyone else; one still
// catching up is left to read e from the history (see catchUp).
func (c *Cacher) dispatch(e *event) {
	var slow []*watcher
	for _, w := range c.targets {
		if w.phase.Load() == lagging {
			continue
		}
		select {
		case w.input <- e:
		case <-w.exited:
		default:
			if !w.phase.CompareAndSwap(catching, lagging) {
				slow = append(slow, w)
			}
		}
	}
	if len(slow) == 0 {
		return
	}
	grace := time.NewTimer(c.cfg.slowWatcherGrace)
	defer grace.Stop()
	expired := false
	for _, w := range slow {
		if !expired {
			select {
			case w.input <- e:
				continue
			case <-w.exited:
				continue
			case <-grace.C:
				expired = true
			}
		}
		select {
		case w.input <- e:
		case <-w.exited:
		default:
			c.forget(w)
			w.end(0)
			c.cfg.metrics.WatcherTerminated()
		}
	}
}

// sendBookmarks tells every watcher that allows bookmarks the cache's
// revision. A watcher with a full queue skips this one.
func (c *Cacher) sendBookmarks() {
	c.mu.RLock()
	e := &event{typ: watch.Bookmark, rv: c.st.rv}
	c.targets = c.targets[:0]
	for w := range c.watchers {
		if w.allowBookmarks {
			c.targets = append(c.targets, w)
		}
	}
	c.mu.RUnlock()
	for _, w := range c.targets {
		select {
		case w.input <- e:
		default:
		}
	}
}

func (c *Cacher) forget(w *watcher) {
	c.mu.Lock()
	delete(c.watchers, w)
	c.mu.Unlock()
}

// shutdown ends every watcher, waits for them, and sends reads to the store.
func (c *Cacher) shutdown() {
	c.mu.Lock()
	c.stopping = true
	c.st.ready = false
	c.st.signal()
	ended := make([]*watcher, 0, len(c.watchers))
	for w := range c.watchers {
		ended = append(ended, w)
	}
	clear(c.watchers)
	c.mu.Unlock()
	for _, w := range ended {
		w.end(0)
	}
	c.watcherWG.Wait()
	c.cfg.metrics.Forget()
}
