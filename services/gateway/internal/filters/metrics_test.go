package filters_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"kplane.dev/services/gateway/internal/filters"
)

// scrape returns the metrics text of h.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := serve(h, http.MethodGet, "/metrics", nil)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d %q", rec.Code, rec.Body.String())
	}
	return rec.Body.String()
}

func TestMetrics(t *testing.T) {
	cfg := filters.DefaultConfig()
	cfg.MaxMutatingRequestsInFlight = 1
	f, reg := newFilters(t, cfg)
	entered := make(chan struct{})
	release := make(chan struct{})
	e := newEcho(func(c echo.Context) error {
		switch {
		case c.QueryParam("hold") == "true":
			entered <- struct{}{}
			<-release
		case c.Request().URL.Path == "/api/v1/namespaces/default/configmaps/missing":
			return echo.NewHTTPError(http.StatusNotFound)
		case c.Request().Method == http.MethodPost:
			return c.String(http.StatusCreated, "created")
		}
		return ok(c)
	}, f.Metrics(), f.MaxInFlight())
	metrics := filters.MetricsHandler(reg)

	requests := []struct {
		method, target, contentType string
	}{
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/a", ""},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/a", ""},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/missing", ""},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Da", ""},
		{http.MethodGet, "/apis/apps/v1/deployments", ""},
		{http.MethodGet, "/api/v1/watch/namespaces/default/configmaps", ""},
		{http.MethodPost, "/apis/apps/v1/namespaces/default/deployments?dryRun=All", ""},
		{http.MethodPatch, "/apis/apps/v1/namespaces/default/deployments/d?dryRun=All&dryRun=All", "application/apply-patch+yaml"},
		{http.MethodPatch, "/api/v1/namespaces/default/configmaps/a?dryRun=Some", "application/merge-patch+json"},
		{http.MethodDelete, "/api/v1/namespaces/default/configmaps", ""},
		{http.MethodPut, "/api/v1/namespaces/n/status", ""},
		{http.MethodGet, "/api/v1/namespaces/default/pods/p/log", ""},
		{http.MethodGet, "/readyz", ""},
		{http.MethodGet, "/readyz/ping", ""},
		{http.MethodGet, "/version", ""},
		{http.MethodOptions, "/api/v1/namespaces", ""},
	}
	for _, r := range requests {
		req, _ := http.NewRequest(r.method, r.target, nil)
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		serveRequest(e, req)
	}

	// Hold a watch and a write, and have a second write refused.
	var wg sync.WaitGroup
	for _, target := range []string{"/api/v1/namespaces/default/configmaps?watch=1&hold=true", "/apis/apps/v1/namespaces/default/deployments?hold=true"} {
		method := http.MethodGet
		if strings.HasPrefix(target, "/apis") {
			method = http.MethodPost
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(e, method, target, nil)
		}()
		<-entered
	}
	serve(e, http.MethodPost, "/apis/apps/v1/namespaces/default/deployments", nil)

	held := scrape(t, metrics)
	close(release)
	wg.Wait()
	done := scrape(t, metrics)

	tests := []struct {
		name, text, line string
	}{
		{"get", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 2`},
		{"not found", done, `apiserver_request_total{code="404",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1"} 1`},
		{"list of one name by field selector", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="LIST",version="v1"} 1`},
		{"cluster list", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="apps",resource="deployments",scope="cluster",subresource="",verb="LIST",version="v1"} 1`},
		{"legacy watch path", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 2`},
		{"dry-run create", done, `apiserver_request_total{code="201",component="apiserver",dry_run="All",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 1`},
		{"apply", done, `apiserver_request_total{code="200",component="apiserver",dry_run="All",group="apps",resource="deployments",scope="resource",subresource="",verb="APPLY",version="v1"} 1`},
		{"invalid dry run", done, `apiserver_request_total{code="200",component="apiserver",dry_run="invalid",group="",resource="configmaps",scope="resource",subresource="",verb="PATCH",version="v1"} 1`},
		{"deletecollection is DELETE", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="configmaps",scope="namespace",subresource="",verb="DELETE",version="v1"} 1`},
		{"subresource", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="resource",subresource="status",verb="PUT",version="v1"} 1`},
		{"logs are CONNECT", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="log",verb="CONNECT",version="v1"} 1`},
		{"unknown method", done, `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="namespaces",scope="cluster",subresource="",verb="other",version="v1"} 1`},
		{"health endpoint", done, `apiserver_request_total{code="200",component="",dry_run="",group="",resource="",scope="",subresource="/readyz",verb="GET",version=""} 1`},
		{"refused write", done, `apiserver_request_total{code="429",component="apiserver",dry_run="",group="apps",resource="deployments",scope="resource",subresource="",verb="POST",version="v1"} 1`},
		{"kube's first bucket", done, `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1",le="0.005"}`},
		{"kube's last bucket, with the not found", done, `apiserver_request_duration_seconds_bucket{component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="GET",version="v1",le="60"} 3`},
		{"watch open", held, `apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 1`},
		{"watch closed", done, `apiserver_longrunning_requests{component="apiserver",group="",resource="configmaps",scope="namespace",subresource="",verb="WATCH",version="v1"} 0`},
		{"write in flight", held, `apiserver_current_inflight_requests{request_kind="mutating"} 1`},
		{"no write in flight", done, `apiserver_current_inflight_requests{request_kind="mutating"} 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(tt.text, tt.line+"\n") && !strings.Contains(tt.text, tt.line+" ") {
				t.Errorf("metrics lack %s", tt.line)
			}
		})
	}
	t.Run("single checks and /version are not recorded", func(t *testing.T) {
		for _, s := range []string{`subresource="/readyz/ping"`, `subresource="/version"`} {
			if strings.Contains(done, s) {
				t.Errorf("metrics have %s", s)
			}
		}
	})
}
