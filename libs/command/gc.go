package command

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// liveHeap is the runtime metric of the heap the last collection marked.
const liveHeap = "/gc/heap/live:bytes"

// maxGCPercent bounds the percentage KeepGCHeadroom sets, for a live heap
// of a few MiB.
const maxGCPercent = 1000

// KeepGCHeadroom lets the heap grow by at least headroom bytes between
// collections, unless the GOGC environment variable sets the collector's
// pace: after every collection it sets GOGC to the percentage of the live
// heap that headroom is, when that is above Go's default of 100. At Go's
// default a service whose live heap is a few MiB (the gateway keeps no
// objects) collects after every few MiB it allocates, and spent a tenth of
// its CPU doing so; a GOGC fixed high enough to stop that would multiply a
// heap that grows with open connections instead. With a headroom, a heap
// of live bytes grows to at most live+max(live, headroom) before it is
// collected. stop ends the adjustments and restores GOGC to 100.
func KeepGCHeadroom(headroom uint64) (stop func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	h := &gcHeadroom{headroom: headroom, sample: []metrics.Sample{{Name: liveHeap}}}
	h.arm()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.stopped = true
		debug.SetGCPercent(100)
	}
}

type gcHeadroom struct {
	headroom uint64
	mu       sync.Mutex
	stopped  bool
	sample   []metrics.Sample
}

// sentinel is garbage the moment it is made, so that the collection after
// that runs the cleanup attached to it: one adjustment per collection.
// Its pointer keeps it out of the tiny allocator, whose blocks free
// together.
type sentinel struct {
	_ *gcHeadroom
	_ [2]uint64
}

func (h *gcHeadroom) arm() {
	runtime.AddCleanup(new(sentinel), func(h *gcHeadroom) { h.adjust() }, h)
}

// adjust sets GOGC for the live heap the last collection left. It sets
// it every time rather than when it changes: whoever else sets GOGC is
// overruled at the next collection.
func (h *gcHeadroom) adjust() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	metrics.Read(h.sample)
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		debug.SetGCPercent(gcPercentFor(h.sample[0].Value.Uint64(), h.headroom))
	}
	h.arm()
}

// gcPercentFor is the GOGC that lets a heap of live bytes grow by
// headroom, never below Go's default of 100 nor above maxGCPercent.
func gcPercentFor(live, headroom uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	p := math.Ceil(float64(headroom) * 100 / float64(live))
	return int(min(max(p, 100), maxGCPercent))
}
