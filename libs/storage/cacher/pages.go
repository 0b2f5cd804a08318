package cacher

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
)

// Paged lists are served from the cache as kube-apiserver 1.34 serves
// them (ListFromCacheSnapshot): the first page is taken from a snapshot of
// the cache at its revision, and each continue token names that revision,
// whose snapshot the next pages read. Read from etcd instead, every page
// was decoded afresh: decoding was half of core's CPU under paged lists.
// A token whose snapshot is gone (expired, or issued by another replica)
// is read from etcd, as before, which gives the same page.

const (
	// maxSnapshots bounds the snapshots kept; the oldest goes first.
	maxSnapshots = 8
	// snapshotTTL is how long a snapshot serves continue tokens. It keeps
	// the objects of its revision alive, so it is short: a client paging
	// slower than this reads its next page from etcd.
	snapshotTTL = 30 * time.Second
)

// snapshot is the cache's items at revision rv, a copy-on-write clone that
// nothing writes to, so any number of readers may share it.
type snapshot struct {
	rv    int64
	items *btree.BTreeG[entry]
	taken time.Time
}

type snapshots struct {
	mu   sync.Mutex
	list []snapshot // oldest first
}

func (s *snapshots) at(rv int64, now time.Time) *btree.BTreeG[entry] {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(now)
	for _, sn := range s.list {
		if sn.rv == rv {
			return sn.items
		}
	}
	return nil
}

func (s *snapshots) add(sn snapshot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expire(sn.taken)
	for _, have := range s.list {
		if have.rv == sn.rv {
			return
		}
	}
	if len(s.list) == maxSnapshots {
		s.list = append(s.list[:0], s.list[1:]...)
	}
	s.list = append(s.list, sn)
}

func (s *snapshots) expire(now time.Time) {
	n := 0
	for n < len(s.list) && now.Sub(s.list[n].taken) > snapshotTTL {
		n++
	}
	if n > 0 {
		s.list = append(s.list[:0], s.list[n:]...)
	}
}

// pagedFromCache reports whether List serves a page from a snapshot: a
// consistent first page, or a continue of any.
func (c *Cacher) pagedFromCache(prefix string, opts storage.ListOptions) bool {
	if !strings.HasPrefix(prefix, c.prefix) || opts.Limit <= 0 || opts.ResourceVersionMatch != "" {
		return false
	}
	if opts.Continue != "" {
		// Any other resourceVersion with a token is the store's error.
		return opts.ResourceVersion == "" || opts.ResourceVersion == "0"
	}
	return opts.ResourceVersion == ""
}

func (c *Cacher) page(ctx context.Context, prefix string, opts storage.ListOptions) (*storage.ListResult, error) {
	start := prefix
	var items *btree.BTreeG[entry]
	var rv int64
	if opts.Continue != "" {
		key, tokenRV, err := storage.DecodeContinue(opts.Continue, prefix)
		if err != nil {
			return nil, err
		}
		// A snapshot outlives its revision's compaction, after which kube
		// answers a continue with 410 Gone: etcd's reading says which.
		if items = c.snaps.at(tokenRV, time.Now()); items == nil {
			return c.store.List(ctx, prefix, opts)
		}
		if retained, err := c.store.Retains(ctx, tokenRV); err != nil || !retained {
			return c.store.List(ctx, prefix, opts)
		}
		start, rv = key, tokenRV
	} else {
		if !c.ready() {
			return c.store.List(ctx, prefix, opts)
		}
		if reached, err := c.caughtUp(ctx, "list", prefix); err != nil {
			return nil, err
		} else if !reached {
			return c.store.List(ctx, prefix, opts)
		}
		items, rv = c.snapshot()
	}
	ctx, span := startRead(ctx, "list", prefix)
	defer span.End()
	res, err := pageOf(items, prefix, start, rv, opts)
	if err != nil {
		return nil, err
	}
	if res.Continue != "" && opts.Continue == "" {
		c.snaps.add(snapshot{rv: rv, items: items, taken: time.Now()})
	}
	return res, nil
}

// snapshot clones the cache's items; a clone is cheap (it shares every
// node until one side writes), but it changes the tree it is taken from,
// so it takes the write lock.
func (c *Cacher) snapshot() (*btree.BTreeG[entry], int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.st.items.Clone(), c.st.rv
}

// pageOf is the page of the keys below prefix from start on in items, as
// the etcd3 store pages: up to opts.Limit matching objects, a continue
// token after the last of them when any key follows it, and, with nothing
// filtered, how many keys follow.
func pageOf(items *btree.BTreeG[entry], prefix, start string, rv int64, opts storage.ListOptions) (*storage.ListResult, error) {
	res := &storage.ListResult{Items: []runtime.Object{}, ResourceVersion: rv}
	var last string
	var more bool
	var err error
	match := opts.Predicate.Matcher()
	need := requiredLabels(opts.Predicate.Label)
	items.AscendGreaterOrEqual(entry{key: start}, func(e entry) bool {
		if !strings.HasPrefix(e.key, prefix) {
			return false
		}
		if int64(len(res.Items)) == opts.Limit {
			more = true
			return false
		}
		if !e.labels.mayMatch(need) {
			return true
		}
		var ok bool
		if ok, err = match(e.obj); err != nil {
			err = fmt.Errorf("match %q: %w", e.key, err)
			return false
		}
		if ok {
			res.Items = append(res.Items, e.obj)
			last = e.key
		}
		return true
	})
	if err != nil {
		return nil, err
	}
	if !opts.Shared {
		for i, obj := range res.Items {
			res.Items[i] = obj.DeepCopyObject()
		}
	}
	if !more {
		return res, nil
	}
	if res.Continue, err = storage.EncodeContinue(last+"\x00", prefix, rv); err != nil {
		return nil, err
	}
	if opts.Predicate.Empty() {
		var remaining int64
		items.AscendGreaterOrEqual(entry{key: last + "\x00"}, func(e entry) bool {
			if !strings.HasPrefix(e.key, prefix) {
				return false
			}
			remaining++
			return true
		})
		res.RemainingItemCount = &remaining
	}
	return res, nil
}
