package command

import (
	"runtime/debug"
	"testing"
)

func TestDefaultGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	DefaultGCPercent(400)
	if got := debug.SetGCPercent(100); got != 400 {
		t.Errorf("without GOGC: GC percent %d, want 400", got)
	}

	// An operator's GOGC wins: the runtime read it at start, and the
	// default must not replace it.
	t.Setenv("GOGC", "150")
	debug.SetGCPercent(150)
	DefaultGCPercent(400)
	if got := debug.SetGCPercent(100); got != 150 {
		t.Errorf("with GOGC=150: GC percent %d, want 150", got)
	}
}
