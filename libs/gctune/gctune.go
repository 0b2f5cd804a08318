package gctune

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// defaultPercent is Go's GOGC default, kept for heaps larger than the
// headroom and restored when tuning stops.
const defaultPercent = 100

// Start keeps at least headroom bytes between the heap's live part and the
// size at which the next collection starts, until ctx ends. It reports
// whether it tunes: not when headroom is not positive or GOGC is set.
func Start(ctx context.Context, headroom int64) bool {
	if headroom <= 0 || os.Getenv("GOGC") != "" {
		return false
	}
	t := &tuner{
		headroom: uint64(headroom),
		percent:  defaultPercent,
		samples: []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/gc/scan/stack:bytes"},
			{Name: "/gc/scan/globals:bytes"},
		},
	}
	t.arm()
	context.AfterFunc(ctx, t.stop)
	return true
}

// tuner sets GOGC after every collection from what that collection found
// live.
type tuner struct {
	headroom uint64

	mu      sync.Mutex
	stopped bool
	percent int
	samples []metrics.Sample
}

// sentinel is garbage as soon as it is made: its finalizer runs once per
// collection, after it, and arms the next.
type sentinel struct{ t *tuner }

func (t *tuner) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) { s.t.collected() })
}

// collected sets GOGC so that the next collection starts once the heap has
// grown by the headroom, or by GOGC=100's amount when that is more. GOGC
// applies to the live heap together with the goroutine stacks and globals
// the collector scans, so they count too.
func (t *tuner) collected() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.samples)
	var scanned uint64
	for _, s := range t.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			scanned += s.Value.Uint64()
		}
	}
	percent := defaultPercent
	if scanned > 0 && t.headroom > scanned {
		percent = int(t.headroom * 100 / scanned)
	}
	// Within a twentieth of the current value is close enough: setting
	// GOGC takes the heap lock.
	if d := percent - t.percent; d*20 > t.percent || -d*20 > t.percent {
		debug.SetGCPercent(percent)
		t.percent = percent
	}
	t.arm()
}

func (t *tuner) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	debug.SetGCPercent(defaultPercent)
}
