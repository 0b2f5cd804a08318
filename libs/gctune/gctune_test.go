package gctune

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// read returns a runtime metric of kind uint64.
func read(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// collectUntil runs collections until ok holds, failing the test after a
// generous bound: the tuner acts in the finalizer goroutine, after a
// collection.
func collectUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after collections for 10s: %s; GOGC is %d%%, heap goal %d bytes, live %d", what, read("/gc/gogc:percent"), read("/gc/heap/goal:bytes"), read("/gc/heap/live:bytes"))
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func TestHeadroom(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(defaultPercent)
	const headroom = 512 << 20
	ctx, cancel := context.WithCancel(context.Background())
	if !Start(ctx, headroom) {
		t.Fatal("Start did not tune")
	}
	collectUntil(t, "the heap goal is not the live heap plus the headroom", func() bool {
		return read("/gc/heap/goal:bytes") >= headroom
	})
	cancel()
	collectUntil(t, "GOGC is not back to 100 after the context ended", func() bool {
		return read("/gc/gogc:percent") == defaultPercent
	})
}

// A live heap larger than the headroom keeps GOGC=100, which gives it
// more room than the headroom would.
func TestLargeHeapKeepsDefault(t *testing.T) {
	t.Setenv("GOGC", "")
	defer debug.SetGCPercent(defaultPercent)
	live := make([]byte, 64<<20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	Start(ctx, 16<<20)
	// A sentinel of the test's own, armed after Start's: once its
	// finalizer ran, the tuner's has run for the same collection.
	done := make(chan struct{})
	runtime.SetFinalizer(&sentinel{}, func(*sentinel) { close(done) })
	for finished := false; !finished; {
		runtime.GC()
		select {
		case <-done:
			finished = true
		case <-time.After(10 * time.Millisecond):
		}
	}
	runtime.GC()
	if got := read("/gc/gogc:percent"); got != defaultPercent {
		t.Fatalf("GOGC = %d with a live heap of 64 MiB and a headroom of 16 MiB, want %d", got, defaultPercent)
	}
	runtime.KeepAlive(live)
}

func TestOff(t *testing.T) {
	t.Setenv("GOGC", "")
	if Start(context.Background(), 0) {
		t.Fatal("Start tunes with no headroom")
	}
	t.Setenv("GOGC", "100")
	if Start(context.Background(), 64<<20) {
		t.Fatal("Start tunes with GOGC set")
	}
}
