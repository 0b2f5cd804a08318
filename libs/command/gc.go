package command

import (
	"os"
	"runtime/debug"
)

// DefaultGCPercent sets the garbage collector's GOGC to percent unless the
// GOGC environment variable names one. A service that holds little (the
// gateway keeps no objects, only bounded caches) collects its few MiB of
// live heap after every few MiB it allocates at Go's default of 100, and
// spends a tenth of its CPU doing so; a larger percentage buys that CPU
// back for a few tens of MiB. Services that cache the objects they serve
// keep the default, since their heap grows with the data.
func DefaultGCPercent(percent int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(percent)
}
