package command

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, headroom uint64
		want           int
	}{
		{live: 16 * mib, headroom: 64 * mib, want: 400},
		{live: 48 * mib, headroom: 64 * mib, want: 134},
		{live: 64 * mib, headroom: 64 * mib, want: 100},
		{live: 512 * mib, headroom: 64 * mib, want: 100},
		{live: 1 * mib, headroom: 64 * mib, want: maxGCPercent},
		{live: 0, headroom: 64 * mib, want: maxGCPercent},
	} {
		if got := gcPercentFor(c.live, c.headroom); got != c.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", c.live/mib, c.headroom/mib, got, c.want)
		}
	}
}

// gcPercent reads the collector's GOGC, which only setting it reveals.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestKeepGCHeadroom(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100) })
	t.Setenv("GOGC", "")
	// Far more than this test's live heap: the percentage goes to its
	// bound after a collection or two.
	stop := KeepGCHeadroom(1 << 40)
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != maxGCPercent {
		if time.Now().After(deadline) {
			stop()
			t.Fatalf("GOGC %d after collections, want %d", gcPercent(), maxGCPercent)
		}
		runtime.GC()
		runtime.Gosched()
	}
	stop()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC %d after stop, want 100", p)
	}
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != 100 {
		t.Errorf("GOGC %d after stop and collections, want 100", p)
	}
}

func TestKeepGCHeadroomLeavesGOGC(t *testing.T) {
	t.Cleanup(func() { debug.SetGCPercent(100) })
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	stop := KeepGCHeadroom(1 << 40)
	defer stop()
	runtime.GC()
	runtime.GC()
	if p := gcPercent(); p != 150 {
		t.Errorf("GOGC %d with GOGC=150 set, want 150", p)
	}
}
