package rest

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// encodingCacheBytes bounds the encoded objects an encodingCache keeps:
// the objects of a few thousand ConfigMaps, or the last changes of a
// resource whose objects are large.
const encodingCacheBytes = 64 << 20

// encodingCache shares the encoding of an object as stored among the
// requests that send it. Every watch of a resource is handed the same
// change as its own copy; with 100 watches, encoding each copy anew was a
// quarter of core's CPU (kube-apiserver's cachingObject shares the
// encoding the same way). A list sends the same objects again and again:
// encoding them was half of core's CPU listing 1,000 ConfigMaps. So do
// gets of objects read more often than they are written.
//
// An object's state is known by its UID and resourceVersion: the store
// holds one state of an object per revision. The one exception is a watch
// whose selector an object leaves: it is sent the object's previous state
// as DELETED at the revision of the change, so deletions are kept apart.
// Only an object's latest state is kept, so the cache holds about one
// entry per object and form; the oldest are dropped beyond the bound.
type encodingCache struct {
	mu      sync.Mutex
	entries map[encodingKey]*encoding
	// order[head:] are the entries oldest first, for eviction; an entry
	// replaced since has another generation there.
	order []queued
	head  int
	gen   uint64
	bytes int
	// limit is encodingCacheBytes but in tests.
	limit int
}

type encodingKey struct {
	uid      types.UID
	deleted  bool
	gvk      schema.GroupVersionKind
	protobuf bool
}

type queued struct {
	key encodingKey
	gen uint64
}

type encoding struct {
	rv   string
	gen  uint64
	once sync.Once
	data []byte
	err  error
	// size is what the entry counts for in encodingCache.bytes, set under
	// encodingCache.mu once encoded: 0 until then.
	size int
}

func newEncodingCache() *encodingCache {
	return &encodingCache{entries: map[encodingKey]*encoding{}, limit: encodingCacheBytes}
}

// encode returns encode(obj), from the cache when another request has
// encoded the same state in the same form; deleted says obj is sent as
// DELETED. Objects without a UID or resourceVersion are encoded every
// time.
func (c *encodingCache) encode(obj runtime.Object, deleted, protobuf bool, encode func(runtime.Object) ([]byte, error)) ([]byte, error) {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetUID() == "" || m.GetResourceVersion() == "" {
		return encode(obj)
	}
	key := encodingKey{uid: m.GetUID(), deleted: deleted, gvk: obj.GetObjectKind().GroupVersionKind(), protobuf: protobuf}
	rv := m.GetResourceVersion()
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok || e.rv != rv {
		if ok {
			c.bytes -= e.size
		}
		c.gen++
		e = &encoding{rv: rv, gen: c.gen}
		c.entries[key] = e
		c.order = append(c.order, queued{key: key, gen: e.gen})
		if len(c.order)-c.head > 2*len(c.entries)+64 {
			c.compact()
		}
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

// compact drops the places in order of entries replaced since, which an
// object changed again and again would otherwise pile up.
func (c *encodingCache) compact() {
	live := c.order[:0]
	for _, q := range c.order[c.head:] {
		if e, ok := c.entries[q.key]; ok && e.gen == q.gen {
			live = append(live, q)
		}
	}
	clear(c.order[len(live):])
	c.order, c.head = live, 0
}

// evict drops the oldest entries while the cache holds more than its
// limit, keeping the newest.
func (c *encodingCache) evict() {
	for c.bytes > c.limit && len(c.order)-c.head > 1 {
		q := c.order[c.head]
		c.order[c.head] = queued{}
		c.head++
		if e, ok := c.entries[q.key]; ok && e.gen == q.gen {
			c.bytes -= e.size
			delete(c.entries, q.key)
		}
	}
	if c.head > len(c.order)/2 {
		c.order = append(c.order[:0], c.order[c.head:]...)
		c.head = 0
	}
}
