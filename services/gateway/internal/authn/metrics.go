package authn

import (
	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/metrics"
)

// NewCacheMetrics registers kube-apiserver's token cache lookups on reg,
// by whether the gateway had the review of the token (hit) or asked authn
// (miss).
func NewCacheMetrics(reg prometheus.Registerer) (*metrics.CacheLookups, error) {
	return metrics.NewCacheLookups(reg, prometheus.CounterOpts{
		Namespace: "authentication", Subsystem: "token_cache", Name: "request_total",
		Help: "Number of token cache lookups, by whether the answer was cached (hit) or not (miss).",
	})
}
