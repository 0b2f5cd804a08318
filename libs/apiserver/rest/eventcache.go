package rest

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// eventCacheBytes bounds the encoded objects an eventCache keeps. The
// watches of a resource send each change within moments of each other,
// so the cache needs to hold only the last few changes; the bound keeps
// a burst of large objects from holding on to memory.
const eventCacheBytes = 16 << 20

// eventCache shares the encoding of a watch event's object among the
// watches that send it. Every watch of a resource is handed the same
// change as its own copy; with 100 watches, encoding each copy anew was a
// quarter of core's CPU (kube-apiserver's cachingObject shares the
// encoding the same way).
//
// An object is known by its UID and resourceVersion: the store holds one
// state of an object per revision. The event type is part of the key
// because a watch whose selector an object leaves is sent the object's
// previous state as DELETED at the revision of the change, while other
// watches get the new state as MODIFIED.
type eventCache struct {
	mu      sync.Mutex
	entries map[eventKey]*encodedEvent
	// order[head:] are the keys oldest first, for eviction.
	order []eventKey
	head  int
	bytes int
	// limit is eventCacheBytes but in tests.
	limit int
}

type eventKey struct {
	uid      types.UID
	rv       string
	typ      watch.EventType
	gvk      schema.GroupVersionKind
	protobuf bool
}

type encodedEvent struct {
	once sync.Once
	data []byte
	err  error
	// size is what the entry counts for in eventCache.bytes, set under
	// eventCache.mu once encoded: 0 until then and after eviction.
	size int
}

func newEventCache() *eventCache {
	return &eventCache{entries: map[eventKey]*encodedEvent{}, limit: eventCacheBytes}
}

// encode returns encode(obj), from the cache when another watch has
// encoded the same state for the same event type and form. Objects
// without a UID or resourceVersion are encoded every time.
func (c *eventCache) encode(typ watch.EventType, obj runtime.Object, protobuf bool, encode func(runtime.Object) ([]byte, error)) ([]byte, error) {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetUID() == "" || m.GetResourceVersion() == "" {
		return encode(obj)
	}
	key := eventKey{uid: m.GetUID(), rv: m.GetResourceVersion(), typ: typ, gvk: obj.GetObjectKind().GroupVersionKind(), protobuf: protobuf}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &encodedEvent{}
		c.entries[key] = e
		c.order = append(c.order, key)
	}
	c.mu.Unlock()
	e.once.Do(func() {
		data, err := encode(obj)
		c.mu.Lock()
		defer c.mu.Unlock()
		e.data, e.err = data, err
		if c.entries[key] == e {
			e.size = len(data)
			c.bytes += e.size
			c.evict()
		}
	})
	return e.data, e.err
}

// evict drops the oldest entries while the cache holds more than its
// limit, keeping the newest.
func (c *eventCache) evict() {
	for c.bytes > c.limit && len(c.order)-c.head > 1 {
		key := c.order[c.head]
		c.order[c.head] = eventKey{}
		c.head++
		c.bytes -= c.entries[key].size
		delete(c.entries, key)
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}
