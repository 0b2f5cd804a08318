package etcd3

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/storage"
)

// resultBuffer is how many events a slow consumer may fall behind before
// the watch stops reading from etcd.
const resultBuffer = 100

// Watch implements storage.Interface.
func (s *Store) Watch(ctx context.Context, prefix string, opts storage.WatchOptions) (watch.Interface, error) {
	if err := storage.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	rv, err := parseRV(opts.ResourceVersion, prefix)
	if err != nil {
		return nil, err
	}
	if m := opts.ResourceVersionMatch; m != "" && m != metav1.ResourceVersionMatchNotOlderThan {
		return nil, storage.NewError(storage.ErrCodeInvalidRequest, prefix, 0, fmt.Sprintf("resourceVersionMatch %q is not allowed for watch", m))
	}
	w := &watcher{
		store:   s,
		prefix:  prefix,
		opts:    opts,
		startRV: rv,
		result:  make(chan watch.Event, resultBuffer),
		done:    make(chan struct{}),
	}
	switch {
	case opts.SendInitialEvents != nil && *opts.SendInitialEvents:
		w.initial, w.endBookmark = true, opts.AllowBookmarks
	case opts.SendInitialEvents == nil && rv == 0:
		w.initial = true
	}
	if rv == 0 {
		// "From now" is from when Watch returns: a write the caller makes
		// after it is an event, never part of the initial state, so the
		// revision is read here rather than in the watch's goroutine.
		cur, err := s.CurrentRevision(ctx)
		if err != nil {
			return nil, fmt.Errorf("watch %q: %w", prefix, err)
		}
		w.startRV, w.pinned = cur, true
	}
	ctx, w.cancel = context.WithCancel(ctx)
	s.handoff.watches.Add(1)
	go w.run(ctx)
	return w, nil
}

// watcher is one Watch call: it owns the goroutine that turns etcd watch
// responses into events and closes result when it ends.
type watcher struct {
	store   *Store
	prefix  string
	opts    storage.WatchOptions
	startRV int64
	// initial sends the state as ADDED events before the changes;
	// endBookmark then marks their end with an annotated BOOKMARK.
	initial, endBookmark bool
	// pinned says startRV is the revision Watch read for a watch from
	// now: the initial state is read exactly there.
	pinned bool

	result chan watch.Event
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

func (w *watcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch and waits for its goroutine, so no event follows.
func (w *watcher) Stop() {
	w.once.Do(w.cancel)
	<-w.done
}

func (w *watcher) run(ctx context.Context) {
	defer w.store.handoff.watches.Add(-1)
	defer close(w.done)
	defer close(w.result)
	defer w.cancel()

	from := w.startRV
	if w.initial {
		rev, ok := w.sendInitial(ctx)
		if !ok {
			return
		}
		from = rev
	}

	w.stream(ctx, from)
}

// stream sends the changes after revision from until ctx ends or etcd
// ends the watch.
func (w *watcher) stream(ctx context.Context, from int64) {
	// etcd sends no progress notification to a watch whose start revision
	// it has not reached, so a watch from the current revision would see
	// no bookmark before the next write. Starting one revision early and
	// skipping that revision's events avoids it; only when exactly that
	// revision was compacted does the watch start at from+1.
	if w.streamFrom(ctx, from, from) {
		w.streamFrom(ctx, from, from+1)
	}
}

// streamFrom runs one etcd watch from revision start, sending the events
// after from. It reports whether etcd compacted start but not from+1.
func (w *watcher) streamFrom(ctx context.Context, from, start int64) (retry bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := w.store.client.Watch(wctx, w.prefix,
		clientv3.WithPrefix(), clientv3.WithRev(start), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	for resp := range ch {
		if resp.CompactRevision != 0 {
			if start == from && from+1 >= resp.CompactRevision {
				return true
			}
			w.sendError(ctx, expiredStatus(from, resp.CompactRevision))
			return false
		}
		if err := resp.Err(); err != nil {
			w.sendError(ctx, internalStatus(fmt.Errorf("watch %q: %w", w.prefix, err)))
			return false
		}
		w.store.opts.metrics.EtcdEvents(len(resp.Events))
		if resp.IsProgressNotify() {
			if w.opts.AllowBookmarks && !w.send(ctx, w.bookmark(resp.Header.Revision, false)) {
				return false
			}
			continue
		}
		for _, e := range resp.Events {
			if e.Kv.ModRevision <= from {
				continue
			}
			ev, ok, err := w.transform(e)
			if err != nil {
				w.sendError(ctx, internalStatus(err))
				return false
			}
			if ok && !w.send(ctx, ev) {
				return false
			}
		}
	}
	return false
}

// sendInitial sends the current state (at a revision not older than the
// requested one) as ADDED events and returns the revision it was read at.
func (w *watcher) sendInitial(ctx context.Context) (int64, bool) {
	opts := storage.ListOptions{ResourceVersion: w.opts.ResourceVersion, Predicate: w.opts.Predicate}
	if w.pinned {
		opts.ResourceVersion = strconv.FormatInt(w.startRV, 10)
		opts.ResourceVersionMatch = metav1.ResourceVersionMatchExact
	}
	list, err := w.store.List(ctx, w.prefix, opts)
	if err != nil {
		w.sendError(ctx, statusOf(err))
		return 0, false
	}
	for _, obj := range list.Items {
		if !w.send(ctx, watch.Event{Type: watch.Added, Object: obj}) {
			return 0, false
		}
	}
	if w.endBookmark && !w.send(ctx, w.bookmark(list.ResourceVersion, true)) {
		return 0, false
	}
	return list.ResourceVersion, true
}

// transform turns an etcd event into the watch event this watch's
// predicate sees: an object that stops matching is DELETED, one that starts
// matching is ADDED, like kube-apiserver.
func (w *watcher) transform(e *clientv3.Event) (watch.Event, bool, error) {
	var cur, prev runtime.Object
	var err error
	key := string(e.Kv.Key)
	if e.Type == mvccpb.PUT {
		if cur = w.store.handoff.take(key, e.Kv.Value, 0); cur != nil {
			err = setRV(cur, e.Kv.ModRevision)
		} else {
			cur, err = w.store.decode(e.Kv.Value, e.Kv.ModRevision)
		}
		if err != nil {
			return watch.Event{}, false, err
		}
		if e.PrevKv != nil && w.opts.Predicate.Empty() {
			// Every state matches: the previous one only makes this a
			// modification, which decoding it would not change.
			return watch.Event{Type: watch.Modified, Object: cur}, true, nil
		}
	} else if e.PrevKv != nil {
		// What a deletion removed, at the deletion's revision.
		if prev = w.store.handoff.take(key, e.PrevKv.Value, e.PrevKv.ModRevision); prev != nil {
			if err = setRV(prev, e.Kv.ModRevision); err != nil {
				return watch.Event{}, false, err
			}
		}
	}
	if e.PrevKv != nil && prev == nil {
		// The previous state carries the revision of the change that
		// ended it, which is what a DELETED event reports.
		if prev, err = w.store.decode(e.PrevKv.Value, e.Kv.ModRevision); err != nil {
			return watch.Event{}, false, err
		}
	}
	curOK, err := w.matches(cur)
	if err != nil {
		return watch.Event{}, false, err
	}
	prevOK, err := w.matches(prev)
	if err != nil {
		return watch.Event{}, false, err
	}
	switch {
	case curOK && prevOK:
		return watch.Event{Type: watch.Modified, Object: cur}, true, nil
	case curOK:
		return watch.Event{Type: watch.Added, Object: cur}, true, nil
	case prevOK:
		return watch.Event{Type: watch.Deleted, Object: prev}, true, nil
	}
	return watch.Event{}, false, nil
}

func (w *watcher) matches(obj runtime.Object) (bool, error) {
	if obj == nil {
		return false, nil
	}
	ok, err := w.opts.Predicate.Matches(obj)
	if err != nil {
		return false, fmt.Errorf("match watch event: %w", err)
	}
	return ok, nil
}

// bookmark is an empty object of the kind carrying only rev, annotated
// when it ends the initial events.
func (w *watcher) bookmark(rev int64, initialEnd bool) watch.Event {
	obj := w.store.newObj()
	m, err := meta.Accessor(obj)
	if err == nil {
		_ = setRV(obj, rev)
		if initialEnd {
			m.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
		}
	}
	return watch.Event{Type: watch.Bookmark, Object: obj}
}

func (w *watcher) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *watcher) sendError(ctx context.Context, st *metav1.Status) {
	w.store.opts.logger.Debug("watch ended with error", "prefix", w.prefix, "reason", st.Reason, "message", st.Message)
	w.send(ctx, watch.Event{Type: watch.Error, Object: st})
}

func internalStatus(err error) *metav1.Status {
	return &metav1.Status{Status: metav1.StatusFailure, Code: 500, Reason: metav1.StatusReasonInternalError, Message: err.Error()}
}

// statusOf reports a storage error that ends a watch before it started.
func statusOf(err error) *metav1.Status {
	switch storage.CodeOf(err) {
	case storage.ErrCodeExpired:
		return &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: err.Error()}
	case storage.ErrCodeTooLargeResourceVersion:
		return &metav1.Status{Status: metav1.StatusFailure, Code: 504, Reason: metav1.StatusReasonTimeout, Message: err.Error()}
	}
	return internalStatus(err)
}
