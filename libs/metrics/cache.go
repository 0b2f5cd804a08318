package metrics

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// CacheLookups counts a cache's lookups by status, hit or miss, so that
// a dashboard can divide the one by the sum.
type CacheLookups struct {
	requests *prometheus.CounterVec
}

// NewCacheLookups registers on reg the counter opts names, labelled by
// status.
func NewCacheLookups(reg prometheus.Registerer, opts prometheus.CounterOpts) (*CacheLookups, error) {
	c := &CacheLookups{requests: prometheus.NewCounterVec(opts, []string{"status"})}
	if err := reg.Register(c.requests); err != nil {
		return nil, fmt.Errorf("register %s: %w", prometheus.BuildFQName(opts.Namespace, opts.Subsystem, opts.Name), err)
	}
	// Both from the start, so that a hit ratio is defined before the
	// first miss.
	c.requests.WithLabelValues("hit")
	c.requests.WithLabelValues("miss")
	return c, nil
}

// Lookup records a lookup; a nil *CacheLookups records nothing, for
// callers built without metrics.
func (c *CacheLookups) Lookup(hit bool) {
	if c == nil {
		return
	}
	status := "miss"
	if hit {
		status = "hit"
	}
	c.requests.WithLabelValues(status).Inc()
}
