package cacher

import (
	"iter"
	"sort"
	"strings"
	"time"

	"github.com/google/btree"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// event is one change the cache applied. obj is the state after the change
// (for DELETED, the last state at the deletion's revision) and prevObj the
// state before it, which lets a watch with a selector turn a change that
// crosses the selector into ADDED or DELETED. Events are shared by every
// watcher and never modified; watchers deliver deep copies.
type event struct {
	typ     watch.EventType
	key     string
	obj     runtime.Object
	prevObj runtime.Object
	rv      int64
	// at is when the cache applied the event.
	at time.Time
}

type entry struct {
	key    string
	obj    runtime.Object
	labels labelHashes
}

func newEntry(key string, obj runtime.Object) entry {
	return entry{key: key, obj: obj, labels: hashLabels(obj)}
}

// itemsDegree is kube-apiserver's watch cache's: nodes of up to 63 entries
// keep the tree shallow at 100,000 objects and the copy a change makes
// within one node short.
const itemsDegree = 32

// newItems returns entries as a tree ordered by key. A relist builds it
// before taking the lock, so that readers wait only for the swap.
func newItems(entries []entry) *btree.BTreeG[entry] {
	t := btree.NewG(itemsDegree, func(a, b entry) bool { return a.key < b.key })
	for _, e := range entries {
		t.ReplaceOrInsert(e)
	}
	return t
}

// state is the cache's picture of the resource at revision rv. Cacher.mu
// guards it. Stored objects are never modified in place, so a reader may
// keep a pointer after unlocking and copy it later.
type state struct {
	// items is ordered by key, so a prefix is one contiguous run. It is a
	// tree rather than a sorted slice because an insert or remove in a
	// slice moves half of it: some 70µs per event at 100,000 objects.
	items *btree.BTreeG[entry]
	// ring holds the most recent events in revision order: count of them,
	// the oldest at index first.
	ring  []*event
	first int
	count int
	// minRing and maxRing bound the ring's size, and fresh is the age
	// below which the oldest event is kept by growing the ring rather
	// than evicted.
	minRing, maxRing int
	fresh            time.Duration
	// floor is the oldest revision a watch can start after: every event
	// newer than it is still in the ring.
	floor int64
	// listed is the revision of the last list; floor is still listed
	// when no event was dropped since, nor anything compacted.
	listed int64
	rv     int64
	ready  bool
	// advanced is closed and replaced whenever rv or ready changes, so
	// waiters can select on it together with a deadline.
	advanced chan struct{}
	// lastEvent is when the last change was applied.
	lastEvent time.Time
}

func newState(history, maxHistory int, fresh time.Duration) state {
	return state{items: newItems(nil), ring: make([]*event, history), minRing: history, maxRing: maxHistory, fresh: fresh, advanced: make(chan struct{})}
}

func (s *state) signal() {
	close(s.advanced)
	s.advanced = make(chan struct{})
}

func (s *state) get(key string) (runtime.Object, bool) {
	e, ok := s.items.Get(entry{key: key})
	return e.obj, ok
}

// upsert stores obj at key and returns what was there.
func (s *state) upsert(key string, obj runtime.Object) runtime.Object {
	prev, _ := s.items.ReplaceOrInsert(newEntry(key, obj))
	return prev.obj
}

// remove deletes key and returns what was there.
func (s *state) remove(key string) runtime.Object {
	prev, _ := s.items.Delete(entry{key: key})
	return prev.obj
}

// below yields the entries whose keys start with prefix, in key order,
// and says how many there are when that is known without counting, or 0.
// Iterate only under the lock: the tree changes with every event.
func (s *state) below(prefix string) (iter.Seq[entry], int) {
	first, ok := s.items.Min()
	last, _ := s.items.Max()
	if ok && strings.HasPrefix(first.key, prefix) && strings.HasPrefix(last.key, prefix) {
		// Every key has the prefix, as in a list of the whole resource.
		// A walk from the prefix would search each node for it and
		// compare every key, which makes such a list twice as slow.
		return func(yield func(entry) bool) { s.items.Ascend(yield) }, s.items.Len()
	}
	return func(yield func(entry) bool) {
		s.items.AscendGreaterOrEqual(entry{key: prefix}, func(e entry) bool {
			return strings.HasPrefix(e.key, prefix) && yield(e)
		})
	}, 0
}

// push records e, which must be newer than every event in the ring and
// applied at e.at. When the ring is full it doubles, up to maxRing, while
// its oldest event is fresh; it halves, down to minRing, once even the
// newest quarter of it is not, as kube-apiserver's watch cache resizes,
// so that the events of a burst are not held for good; then the oldest
// event makes room.
func (s *state) push(e *event) {
	if s.count == len(s.ring) {
		switch {
		case len(s.ring) < s.maxRing && e.at.Sub(s.ring[s.first].at) < s.fresh:
			s.resize(min(2*len(s.ring), s.maxRing))
		case len(s.ring) > s.minRing && e.at.Sub(s.nth(s.count-max(len(s.ring)/4, 1)).at) > s.fresh:
			s.resize(max(len(s.ring)/2, s.minRing))
		}
	}
	if s.count == len(s.ring) {
		s.drop(1)
	}
	s.ring[(s.first+s.count)%len(s.ring)] = e
	s.count++
}

// nth is the i-th event of the ring, the oldest being the 0th.
func (s *state) nth(i int) *event { return s.ring[(s.first+i)%len(s.ring)] }

// resize makes the ring hold n events, keeping the newest.
func (s *state) resize(n int) {
	if s.count > n {
		s.drop(s.count - n)
	}
	ring := make([]*event, n)
	for i := range s.count {
		ring[i] = s.nth(i)
	}
	s.ring, s.first = ring, 0
}

// drop forgets the n oldest events, of which there are at least n.
func (s *state) drop(n int) {
	last := s.nth(n - 1)
	for range n {
		s.ring[s.first] = nil
		s.first = (s.first + 1) % len(s.ring)
	}
	s.count -= n
	// Every event newer than the last dropped is still held; like
	// kube-apiserver, name the revision just before the oldest kept.
	s.floor = last.rv
	if s.count > 0 {
		s.floor = s.nth(0).rv - 1
	}
}

// since returns the events below prefix newer than rv, or false when some
// of them are no longer held.
func (s *state) since(rv int64, prefix string) ([]*event, bool) {
	if rv < s.floor {
		return nil, false
	}
	i := sort.Search(s.count, func(i int) bool { return s.nth(i).rv > rv })
	var out []*event
	for ; i < s.count; i++ {
		if e := s.nth(i); strings.HasPrefix(e.key, prefix) {
			out = append(out, e)
		}
	}
	return out, true
}

// replace makes items, built by newItems, the state at rv and forgets the
// events: a watch can only start from rv on.
func (s *state) replace(items *btree.BTreeG[entry], rv int64) {
	s.items = items
	for i := range s.ring {
		s.ring[i] = nil
	}
	s.first, s.count = 0, 0
	s.floor = rv
	s.listed = rv
	s.rv = rv
	s.ready = true
	s.signal()
}
