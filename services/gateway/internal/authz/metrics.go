package authz

import (
	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/metrics"
)

// NewCacheMetrics registers the decision cache's lookups on reg, by
// whether the gateway had the decision (hit) or asked authz (miss); kube
// has no metric of its webhook authorizer's cache to follow.
func NewCacheMetrics(reg prometheus.Registerer) (*metrics.CacheLookups, error) {
	return metrics.NewCacheLookups(reg, prometheus.CounterOpts{
		Namespace: "kplane", Subsystem: "gateway", Name: "decision_cache_requests_total",
		Help: "Lookups of the gateway's authorization decision cache, by whether the decision was cached (hit) or authz was asked (miss).",
	})
}
