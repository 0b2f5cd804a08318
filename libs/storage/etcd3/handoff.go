package etcd3

import (
	"bytes"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
)

// handoffSize is how many written objects wait for a watch at most: a
// watch that falls further behind decodes what it missed.
const handoffSize = 1024

// handoff passes the objects a store writes, already decoded, to the
// store's watch, which would otherwise decode the same bytes again when
// etcd sends the change back. A create or update decoded every object
// twice that way; in core under a create load the second decode was 4%
// of the CPU.
//
// An object is offered with the bytes it is stored as, before the write
// is sent, since etcd may deliver the change to the watch before it
// answers the write. The watch takes it when the change carries the same
// bytes under the same key: decoding those bytes would give the same
// object, whoever wrote them. A delete that starts from the cache's
// object has no bytes: it offers that object under the revision it was
// written at, which the deletion's previous state carries, and which
// names one state of the key. Each object is a copy of its own, taken by
// one watch; nothing is kept while no watch is open.
type handoff struct {
	watches atomic.Int32
	mu      sync.Mutex
	// objects are a key's last writes, oldest first: the writes to one
	// key can come faster than the watch.
	objects map[string][]written
	ring    [handoffSize]string
	next    int
}

// handoffPerKey is how many writes of one key wait at most.
const handoffPerKey = 4

type written struct {
	data []byte
	rev  int64
	obj  runtime.Object
}

// put offers obj, the object data decodes to, for key; or, when data is
// nil, the key's state written at revision rev.
func (h *handoff) put(key string, data []byte, rev int64, obj runtime.Object) {
	if h.watches.Load() == 0 {
		return
	}
	obj = obj.DeepCopyObject()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.objects == nil {
		h.objects = map[string][]written{}
	}
	ws, ok := h.objects[key]
	if !ok {
		if old := h.ring[h.next]; old != "" {
			delete(h.objects, old)
		}
		h.ring[h.next] = key
		h.next = (h.next + 1) % handoffSize
	}
	if len(ws) == handoffPerKey {
		ws = append(ws[:0], ws[1:]...)
	}
	h.objects[key] = append(ws, written{data: data, rev: rev, obj: obj})
}

// take returns, once, the object put for key if data is what it was put
// with, or rev the revision it was put under (0 for a state whose
// revision is not known); nil otherwise. Its resourceVersion is whatever
// it was put with: the caller sets it.
func (h *handoff) take(key string, data []byte, rev int64) runtime.Object {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.objects[key]
	for i, w := range ws {
		if (w.data != nil && bytes.Equal(w.data, data)) || (w.data == nil && rev != 0 && w.rev == rev) {
			if len(ws) == 1 {
				delete(h.objects, key)
			} else {
				h.objects[key] = append(ws[:i:i], ws[i+1:]...)
			}
			return w.obj
		}
	}
	return nil
}
