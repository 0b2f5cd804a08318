package cacher

import (
	"sort"
	"strings"
	"time"

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
	key string
	obj runtime.Object
}

// state is the cache's picture of the resource at revision rv. Cacher.mu
// guards it. Stored objects are never modified in place, so a reader may
// keep a pointer after unlocking and copy it later.
type state struct {
	// items is sorted by key, so a prefix is one contiguous run.
	items []entry
	// ring holds the most recent events in revision order: count of them,
	// the oldest at index first.
	ring  []*event
	first int
	count int
	// maxRing bounds the ring's growth, and fresh is the age below which
	// the oldest event is kept by growing the ring rather than evicted.
	maxRing int
	fresh   time.Duration
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
}

func newState(history, maxHistory int, fresh time.Duration) state {
	return state{ring: make([]*event, history), maxRing: maxHistory, fresh: fresh, advanced: make(chan struct{})}
}

func (s *state) signal() {
	close(s.advanced)
	s.advanced = make(chan struct{})
}

func (s *state) search(key string) (int, bool) {
	i := sort.Search(len(s.items), func(i int) bool { return s.items[i].key >= key })
	return i, i < len(s.items) && s.items[i].key == key
}

func (s *state) get(key string) (runtime.Object, bool) {
	i, ok := s.search(key)
	if !ok {
		return nil, false
	}
	return s.items[i].obj, true
}

// upsert stores obj at key and returns what was there.
func (s *state) upsert(key string, obj runtime.Object) runtime.Object {
	i, ok := s.search(key)
	if ok {
		prev := s.items[i].obj
		s.items[i].obj = obj
		return prev
	}
	s.items = append(s.items, entry{})
	copy(s.items[i+1:], s.items[i:])
	s.items[i] = entry{key: key, obj: obj}
	return nil
}

// remove deletes key and returns what was there.
func (s *state) remove(key string) runtime.Object {
	i, ok := s.search(key)
	if !ok {
		return nil
	}
	prev := s.items[i].obj
	copy(s.items[i:], s.items[i+1:])
	s.items[len(s.items)-1] = entry{}
	s.items = s.items[:len(s.items)-1]
	return prev
}

// below returns the entries whose keys start with prefix, in key order. The
// slice aliases items: use it only under the lock.
func (s *state) below(prefix string) []entry {
	i := sort.Search(len(s.items), func(i int) bool { return s.items[i].key >= prefix })
	j := i
	for j < len(s.items) && strings.HasPrefix(s.items[j].key, prefix) {
		j++
	}
	return s.items[i:j]
}

// push records e, which must be newer than every event in the ring and
// applied at e.at. When the ring is full it doubles, up to maxRing, while
// its oldest event is fresh, and evicts that event otherwise.
func (s *state) push(e *event) {
	if s.count == len(s.ring) && len(s.ring) < s.maxRing && e.at.Sub(s.ring[s.first].at) < s.fresh {
		ring := make([]*event, min(2*len(s.ring), s.maxRing))
		for i := range s.count {
			ring[i] = s.ring[(s.first+i)%len(s.ring)]
		}
		s.ring, s.first = ring, 0
	}
	if s.count == len(s.ring) {
		evicted := s.ring[s.first]
		s.ring[s.first] = nil
		s.first = (s.first + 1) % len(s.ring)
		s.count--
		// Every event newer than the evicted one is still held; like
		// kube-apiserver, name the revision just before the oldest kept.
		s.floor = evicted.rv
		if s.count > 0 {
			s.floor = s.ring[s.first].rv - 1
		}
	}
	s.ring[(s.first+s.count)%len(s.ring)] = e
	s.count++
}

// since returns the events below prefix newer than rv, or false when some
// of them are no longer held.
func (s *state) since(rv int64, prefix string) ([]*event, bool) {
	if rv < s.floor {
		return nil, false
	}
	at := func(i int) *event { return s.ring[(s.first+i)%len(s.ring)] }
	i := sort.Search(s.count, func(i int) bool { return at(i).rv > rv })
	var out []*event
	for ; i < s.count; i++ {
		if e := at(i); strings.HasPrefix(e.key, prefix) {
			out = append(out, e)
		}
	}
	return out, true
}

// replace makes items, sorted by key, the state at rv and forgets the
// events: a watch can only start from rv on.
func (s *state) replace(items []entry, rv int64) {
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
