package filters

import (
	"errors"
	"net/http"
	"sync/atomic"

	"kplane.dev/libs/healthz"
)

// PostStartHook is start-up work that must finish before the gateway is
// healthy, named like kube's ("poststarthook/<name>").
type PostStartHook struct {
	name string
	done atomic.Bool
}

// NewPostStartHook is an unfinished hook; name is without the
// "poststarthook/" prefix, e.g. "apiservice-registration-controller".
func NewPostStartHook(name string) *PostStartHook {
	return &PostStartHook{name: "poststarthook/" + name}
}

// Complete marks the hook's work done.
func (h *PostStartHook) Complete() { h.done.Store(true) }

// Check fails until Complete, with kube's reason.
func (h *PostStartHook) Check() healthz.Checker {
	return healthz.NamedCheck(h.name, func(*http.Request) error {
		if !h.done.Load() {
			return errors.New("not finished")
		}
		return nil
	})
}

// HealthEndpoint is one health endpoint; route both "/<Name>" and
// "/<Name>/*" to Handler.
type HealthEndpoint struct {
	Name    string
	Handler http.Handler
}

// HealthEndpoints are /healthz, /livez and /readyz with kube's checks:
// ping, log and the hooks on each, and shutdown on /readyz only, so that
// a draining gateway is unready but alive.
func (f *Filters) HealthEndpoints(hooks ...*PostStartHook) []HealthEndpoint {
	base := []healthz.Checker{healthz.Ping(), healthz.Log()}
	for _, h := range hooks {
		base = append(base, h.Check())
	}
	ready := append(append([]healthz.Checker(nil), base...), f.lifecycle.ShutdownCheck())
	return []HealthEndpoint{
		{Name: "healthz", Handler: healthz.Handler("healthz", base...)},
		{Name: "livez", Handler: healthz.Handler("livez", base...)},
		{Name: "readyz", Handler: healthz.Handler("readyz", ready...)},
	}
}
