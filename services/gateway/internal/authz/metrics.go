package authz

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// CacheMetrics count the decision cache's lookups, by whether the
// gateway had the decision (hit) or asked authz (miss); kube has no
// metric of its webhook authorizer's cache to follow.
type CacheMetrics struct {
	requests *prometheus.CounterVec
}

// NewCacheMetrics registers the decision cache metrics on reg.
func NewCacheMetrics(reg prometheus.Registerer) (*CacheMetrics, error) {
	m := &CacheMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kplane", Subsystem: "gateway", Name: "decision_cache_requests_total",
		Help: "Lookups of the gateway's authorization decision cache, by whether the decision was cached (hit) or authz was asked (miss).",
	}, []string{"status"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, fmt.Errorf("register decision cache metrics: %w", err)
	}
	// Both from the start, so that a hit ratio is defined before the
	// first miss.
	m.requests.WithLabelValues("hit")
	m.requests.WithLabelValues("miss")
	return m, nil
}

// lookup records a lookup; a nil *CacheMetrics records nothing.
func (m *CacheMetrics) lookup(hit bool) {
	if m == nil {
		return
	}
	status := "miss"
	if hit {
		status = "hit"
	}
	m.requests.WithLabelValues(status).Inc()
}
