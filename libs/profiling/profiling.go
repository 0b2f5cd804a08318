package profiling

import (
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"

	"github.com/labstack/echo/v4"
)

// Path is the prefix of every profile; Path without its slash redirects
// to it, as kube's does.
const Path = "/debug/pprof/"

// Handler serves the profiles under Path. With contention, block and
// mutex events are sampled from now on (kube's --contention-profiling);
// the sampling rates are the process's, so the first Handler that asks
// for it turns it on for the whole replica.
func Handler(contention bool) http.Handler {
	if contention {
		runtime.SetBlockProfileRate(1)
		runtime.SetMutexProfileFraction(1)
	}
	mux := http.NewServeMux()
	mux.Handle(strings.TrimSuffix(Path, "/"), http.RedirectHandler(Path, http.StatusMovedPermanently))
	// Index serves the named profiles (heap, goroutine, allocs, block,
	// mutex, threadcreate) under Path too.
	mux.HandleFunc(Path, pprof.Index)
	mux.HandleFunc(Path+"cmdline", pprof.Cmdline)
	mux.HandleFunc(Path+"profile", pprof.Profile)
	mux.HandleFunc(Path+"symbol", pprof.Symbol)
	mux.HandleFunc(Path+"trace", pprof.Trace)
	return mux
}

// RegisterEcho routes every path of the profiles on e to h: Handler's,
// guarded as the caller decides.
func RegisterEcho(e *echo.Echo, h http.Handler) {
	wrapped := echo.WrapHandler(h)
	e.Any(strings.TrimSuffix(Path, "/"), wrapped)
	e.Any(Path+"*", wrapped)
}

// RegisterMux is RegisterEcho for an http.ServeMux.
func RegisterMux(mux *http.ServeMux, h http.Handler) {
	mux.Handle(strings.TrimSuffix(Path, "/"), h)
	mux.Handle(Path, h)
}
