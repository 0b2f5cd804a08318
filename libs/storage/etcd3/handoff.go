package etcd3

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// handoffSize is how many written objects wait for a watch at most: a
// watch that falls further behind decodes what it missed.
const handoffSize = 1024

// handoff passes the objects a store has just written, already decoded,
// to the store's watch, which would otherwise decode the same bytes again
// when etcd sends the change back. A create or update decoded every
// object twice that way; in core under a create load the second decode
// was 4% of the CPU. Each object is a copy of its own, taken by one
// watch; nothing is kept while no watch is open.
type handoff struct {
	watches atomic.Int32
	mu      sync.Mutex
	objects map[handoffKey]runtime.Object
	ring    [handoffSize]handoffKey
	next    int
}

// handoffKey is a change: a key at the revision that wrote or deleted it.
type handoffKey struct {
	key string
	rev int64
}

// put offers obj, the state key has at rev (the object a deletion at rev
// removed, for a deletion), to the watches.
func (h *handoff) put(key string, rev int64, obj runtime.Object) {
	if h.watches.Load() == 0 {
		return
	}
	obj = obj.DeepCopyObject()
	k := handoffKey{key: key, rev: rev}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.objects == nil {
		h.objects = map[handoffKey]runtime.Object{}
	}
	if old := h.ring[h.next]; old.key != "" {
		delete(h.objects, old)
	}
	h.ring[h.next] = k
	h.next = (h.next + 1) % handoffSize
	h.objects[k] = obj
}

// take returns the object put for key at rev, once; nil when there is
// none.
func (h *handoff) take(key string, rev int64) runtime.Object {
	k := handoffKey{key: key, rev: rev}
	h.mu.Lock()
	defer h.mu.Unlock()
	obj, ok := h.objects[k]
	if ok {
		delete(h.objects, k)
	}
	return obj
}
