package filters_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"kplane.dev/services/gateway/internal/filters"
)

// TestMaxInFlight fills both limits with requests held in the handler and
// checks which further requests are refused.
func TestMaxInFlight(t *testing.T) {
	cfg := filters.DefaultConfig()
	cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight = 2, 1
	f, _ := newFilters(t, cfg, filters.WithPrivileged(func(c echo.Context) bool {
		return c.Request().Header.Get("X-Test-Privileged") == "yes"
	}))
	entered := make(chan struct{})
	release := make(chan struct{})
	e := newEcho(func(c echo.Context) error {
		if c.QueryParam("hold") == "true" {
			entered <- struct{}{}
			<-release
		}
		return ok(c)
	}, f.MaxInFlight())

	// Hold two reads and one write: every slot is taken.
	var wg sync.WaitGroup
	held := []struct{ method, target string }{
		{http.MethodGet, "/api/v1/namespaces/default/configmaps?hold=true"},
		{http.MethodGet, "/api/v1/namespaces/default/configmaps/a?hold=true"},
		{http.MethodPost, "/api/v1/namespaces/default/configmaps?hold=true"},
	}
	codes := make([]int, len(held))
	for i, h := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = serve(e, h.method, h.target, nil).Code
		}()
		<-entered
	}

	tests := []struct {
		name, method, target string
		privileged           bool
		code                 int
	}{
		{name: "read over the limit", method: http.MethodGet, target: "/api/v1/namespaces/default/configmaps", code: 429},
		{name: "write over the limit", method: http.MethodDelete, target: "/api/v1/namespaces/default/configmaps/a", code: 429},
		{name: "non-resource read counts as read-only", method: http.MethodGet, target: "/apis", code: 429},
		{name: "watch is exempt", method: http.MethodGet, target: "/api/v1/namespaces/default/configmaps?watch=true", code: 200},
		{name: "logs are exempt", method: http.MethodGet, target: "/api/v1/namespaces/default/pods/p/log", code: 200},
		{name: "readyz is exempt", method: http.MethodGet, target: "/readyz", code: 200},
		{name: "one check is exempt", method: http.MethodGet, target: "/livez/ping", code: 200},
		{name: "privileged is served", method: http.MethodGet, target: "/api/v1/namespaces", privileged: true, code: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, tt.target, nil)
			if tt.privileged {
				req.Header.Set("X-Test-Privileged", "yes")
			}
			rec := serveRequest(e, req)
			if rec.Code != tt.code {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.target, rec.Code, rec.Body.String(), tt.code)
			}
			if tt.code != 429 {
				return
			}
			if got, want := rec.Body.String(), "Too many requests, please try again later.\n"; got != want {
				t.Errorf("body = %q, want %q", got, want)
			}
			for k, want := range map[string]string{"Retry-After": "1", "Content-Type": "text/plain; charset=utf-8", "X-Content-Type-Options": "nosniff"} {
				if got := rec.Header().Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}

	close(release)
	wg.Wait()
	for i, code := range codes {
		if code != 200 {
			t.Errorf("held request %d = %d, want 200", i, code)
		}
	}
	t.Run("slots are free again", func(t *testing.T) {
		if rec := serve(e, http.MethodPost, "/api/v1/namespaces/default/configmaps", nil); rec.Code != 200 {
			t.Errorf("write after release = %d, want 200", rec.Code)
		}
	})
}
