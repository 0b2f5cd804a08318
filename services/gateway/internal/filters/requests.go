package filters

import (
	"strings"

	"github.com/labstack/echo/v4"

	"kplane.dev/libs/apiserver/requestinfo"
)

// InfoFunc returns the request info of c's request; the spine parses it
// once and keeps it in the context.
type InfoFunc func(c echo.Context) *requestinfo.Info

// ParseInfo parses c's request; it is the InfoFunc when none is given.
func ParseInfo(c echo.Context) *requestinfo.Info {
	r := c.Request()
	return requestinfo.Parse(r.Method, r.URL)
}

// longRunningSubresources stream for as long as the client wants, as in
// kube-apiserver's long-running request check.
var longRunningSubresources = map[string]bool{"attach": true, "exec": true, "proxy": true, "log": true, "portforward": true}

// LongRunning reports whether a request may last indefinitely (watches,
// proxy, exec, attach, port-forward, logs, profiles): such requests are
// exempt from max-in-flight and the request timeout, and end at shutdown.
func LongRunning(info *requestinfo.Info) bool {
	if info.Verb == "watch" || info.Verb == "proxy" {
		return true
	}
	if info.IsResourceRequest {
		return longRunningSubresources[info.Subresource]
	}
	return strings.HasPrefix(info.Path, "/debug/pprof/")
}

// healthEndpoints are the health endpoints' names.
var healthEndpoints = []string{"healthz", "livez", "readyz"}

// isHealthPath reports whether path is a health endpoint or one of its
// checks.
func isHealthPath(path string) bool {
	for _, e := range healthEndpoints {
		if rest, ok := strings.CutPrefix(path, "/"+e); ok && (rest == "" || rest[0] == '/') {
			return true
		}
	}
	return false
}

// readOnly reports whether a request counts against the read-only limit
// rather than the mutating one, by kube's rule.
func readOnly(info *requestinfo.Info) bool {
	switch info.Verb {
	case "get", "list", "watch":
		return true
	}
	return false
}
