package authn_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/authn"
)

// TestTokenCacheMetrics counts a token's first lookup as a miss and the
// next as hits, kube's hit ratio of the token cache.
func TestTokenCacheMetrics(t *testing.T) {
	f := newFixture(t)
	reg := prometheus.NewRegistry()
	m, err := authn.NewCacheMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a := authn.New(f.nats.Connect(t), authn.Options{
		Audiences:    []string{authn.DefaultAudience},
		Clock:        f.clock,
		CacheMetrics: m,
		RequestHeader: &authn.RequestHeader{
			ClientCA: f.proxyCA.Pool(), AllowedNames: []string{"front-proxy-client"}, Headers: frontproxy.DefaultHeaders(),
		},
	})
	for range 3 {
		if _, err := a.Authenticate(request(nil, http.Header{"Authorization": {"Bearer good"}})); err != nil {
			t.Fatal(err)
		}
	}
	want := `
# HELP authentication_token_cache_request_total Number of token cache lookups, by whether the answer was cached (hit) or not (miss).
# TYPE authentication_token_cache_request_total counter
authentication_token_cache_request_total{status="hit"} 2
authentication_token_cache_request_total{status="miss"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
