package cache_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kplane.dev/services/authn/internal/authenticator/cache"
)

// TestMetricsCountHitsAndMisses checks the hit ratio a dashboard draws:
// a token's first lookup misses and starts a review, the next hits.
func TestMetricsCountHitsAndMisses(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := cache.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := cache.New(&backend{calls: map[string]int{}}, cache.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"good", "good", "good", "bad"} {
		if _, _, err := a.AuthenticateToken(context.Background(), token); err != nil && token != "bad" {
			t.Fatal(err)
		}
	}
	want := `
# HELP authentication_token_cache_fetch_total Number of reviews the token cache started on a miss, by whether they answered (ok) or failed (error).
# TYPE authentication_token_cache_fetch_total counter
authentication_token_cache_fetch_total{status="error"} 1
authentication_token_cache_fetch_total{status="ok"} 1
# HELP authentication_token_cache_request_total Number of token cache lookups, by whether the answer was cached (hit) or not (miss).
# TYPE authentication_token_cache_request_total counter
authentication_token_cache_request_total{status="hit"} 2
authentication_token_cache_request_total{status="miss"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
