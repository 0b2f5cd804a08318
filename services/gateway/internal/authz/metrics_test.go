package authz_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kplane.dev/libs/natstest"
	"kplane.dev/services/gateway/internal/authz"
)

// TestDecisionCacheMetrics counts a decision's first lookup as a miss and
// the next as hits.
func TestDecisionCacheMetrics(t *testing.T) {
	srv := natstest.Start(t)
	r := startResponder(t, srv.Connect(t))
	r.allow.Store(true)
	reg := prometheus.NewRegistry()
	m, err := authz.NewCacheMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthorizer(t, srv.Connect(t), authz.Options{CacheMetrics: m})
	for range 3 {
		if d, err := a.Authorize(context.Background(), listConfigMaps); err != nil || !d.Allowed {
			t.Fatalf("%+v %v, want allowed", d, err)
		}
	}
	want := `
# HELP kplane_gateway_decision_cache_requests_total Lookups of the gateway's authorization decision cache, by whether the decision was cached (hit) or authz was asked (miss).
# TYPE kplane_gateway_decision_cache_requests_total counter
kplane_gateway_decision_cache_requests_total{status="hit"} 2
kplane_gateway_decision_cache_requests_total{status="miss"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
