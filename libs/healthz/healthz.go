package healthz

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Checker is one named health check. Names are what ?exclude= and
// /<endpoint>/<name> select; kube's are "ping", "log", "etcd",
// "poststarthook/<hook>" and "shutdown".
type Checker interface {
	Name() string
	Check(r *http.Request) error
}

type namedCheck struct {
	name  string
	check func(r *http.Request) error
}

func (c namedCheck) Name() string                { return c.name }
func (c namedCheck) Check(r *http.Request) error { return c.check(r) }

// NamedCheck is a Checker called name that runs check.
func NamedCheck(name string, check func(r *http.Request) error) Checker {
	return namedCheck{name: name, check: check}
}

// Ping is kube's "ping" check: it passes whenever the server answers at
// all, which is what a liveness probe asks.
func Ping() Checker {
	return NamedCheck("ping", func(*http.Request) error { return nil })
}

// Log is kube's "log" check. kube-apiserver fails it when klog's flush
// goroutine is stuck; slog writes synchronously, so a stuck log writer
// blocks the request itself and the probe times out instead. It is listed
// so that the verbose output names the same checks as kube's.
func Log() Checker {
	return NamedCheck("log", func(*http.Request) error { return nil })
}

// Handler serves /<endpoint> from checks, in order, and /<endpoint>/<name>
// for the check called name; a name that is no check is 404. Route both
// "/<endpoint>" and everything under "/<endpoint>/" to it.
func Handler(endpoint string, checks ...Checker) http.Handler {
	root := "/" + endpoint
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if name, ok := strings.CutPrefix(r.URL.Path, root+"/"); ok {
			serveOne(w, r, checks, name)
			return
		}
		serveAll(w, r, endpoint, checks)
	})
}

func serveAll(w http.ResponseWriter, r *http.Request, endpoint string, checks []Checker) {
	// kube keeps the excluded names in a set: duplicates count once and
	// the unmatched ones are reported sorted.
	excluded := r.URL.Query()["exclude"]
	slices.Sort(excluded)
	excluded = slices.Compact(excluded)
	var out bytes.Buffer
	failed := false
	for _, c := range checks {
		if i, found := slices.BinarySearch(excluded, c.Name()); found {
			excluded = slices.Delete(excluded, i, i+1)
			fmt.Fprintf(&out, "[+]%s excluded: ok\n", c.Name())
			continue
		}
		if err := c.Check(r); err != nil {
			// The reason stays out of the answer: the endpoint is public.
			failed = true
			fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", c.Name())
			continue
		}
		fmt.Fprintf(&out, "[+]%s ok\n", c.Name())
	}
	if len(excluded) > 0 {
		fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", quoted(excluded))
	}
	if failed {
		http.Error(w, out.String()+endpoint+" check failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if _, verbose := r.URL.Query()["verbose"]; !verbose {
		_, _ = fmt.Fprint(w, "ok")
		return
	}
	_, _ = out.WriteTo(w)
	_, _ = fmt.Fprintf(w, "%s check passed\n", endpoint)
}

// serveOne answers for one check; unlike the whole endpoint it gives the
// reason of a failure, as kube does.
func serveOne(w http.ResponseWriter, r *http.Request, checks []Checker, name string) {
	i := slices.IndexFunc(checks, func(c Checker) bool { return c.Name() == name })
	if i < 0 {
		http.NotFound(w, r)
		return
	}
	if err := checks[i].Check(r); err != nil {
		http.Error(w, fmt.Sprintf("internal server error: %v", err), http.StatusInternalServerError)
		return
	}
	_, _ = fmt.Fprint(w, "ok")
}

func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ",")
}
