package authn

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// CacheMetrics are kube-apiserver's token cache lookups, by whether the
// gateway had the review of the token (hit) or asked authn (miss).
type CacheMetrics struct {
	requests *prometheus.CounterVec
}

// NewCacheMetrics registers the token cache metrics on reg.
func NewCacheMetrics(reg prometheus.Registerer) (*CacheMetrics, error) {
	m := &CacheMetrics{requests: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "authentication", Subsystem: "token_cache", Name: "request_total",
		Help: "Number of token cache lookups, by whether the answer was cached (hit) or not (miss).",
	}, []string{"status"})}
	if err := reg.Register(m.requests); err != nil {
		return nil, fmt.Errorf("register token cache metrics: %w", err)
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
