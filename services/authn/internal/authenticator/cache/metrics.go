package cache

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are kube-apiserver's token cache metrics: lookups by whether
// they hit, and the reviews a miss started by how they ended.
type Metrics struct {
	requests *prometheus.CounterVec
	fetches  *prometheus.CounterVec
}

// Values of the status labels, kube's.
const (
	statusHit   = "hit"
	statusMiss  = "miss"
	statusOK    = "ok"
	statusError = "error"
)

// NewMetrics registers the token cache metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "authentication", Subsystem: "token_cache", Name: "request_total",
			Help: "Number of token cache lookups, by whether the answer was cached (hit) or not (miss).",
		}, []string{"status"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "authentication", Subsystem: "token_cache", Name: "fetch_total",
			Help: "Number of reviews the token cache started on a miss, by whether they answered (ok) or failed (error).",
		}, []string{"status"}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.fetches} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register token cache metrics: %w", err)
		}
	}
	// Both statuses from the start, so that a hit ratio is defined
	// before the first miss.
	for _, s := range []string{statusHit, statusMiss} {
		m.requests.WithLabelValues(s)
	}
	return m, nil
}

// WithMetrics records the cache's lookups and reviews in m.
func WithMetrics(m *Metrics) Option { return func(a *Authenticator) { a.metrics = m } }

// lookup records a lookup that hit or missed. A nil *Metrics records
// nothing.
func (m *Metrics) lookup(hit bool) {
	if m == nil {
		return
	}
	status := statusMiss
	if hit {
		status = statusHit
	}
	m.requests.WithLabelValues(status).Inc()
}

// fetched records how a review started on a miss ended.
func (m *Metrics) fetched(err error) {
	if m == nil {
		return
	}
	status := statusOK
	if err != nil {
		status = statusError
	}
	m.fetches.WithLabelValues(status).Inc()
}
