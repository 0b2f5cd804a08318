package filters_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/services/gateway/internal/filters"
)

// newFilters builds filters from cfg on a registry of their own.
func newFilters(t *testing.T, cfg filters.Config, opts ...filters.Option) (*filters.Filters, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	f, err := filters.New(cfg, reg, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return f, reg
}

// newEcho serves h behind mws, in order, with the gateway's error handler.
func newEcho(h echo.HandlerFunc, mws ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.Use(mws...)
	e.Any("/*", h)
	return e
}

func serve(e http.Handler, method, target string, body io.Reader) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, httptest.NewRequest(method, target, body))
	return rec
}

func ok(c echo.Context) error { return c.String(http.StatusOK, "done") }

func TestConfig(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*filters.Config)
		want   []string
	}{
		{name: "defaults", modify: func(*filters.Config) {}},
		{name: "everything wrong", modify: func(c *filters.Config) {
			*c = filters.Config{MaxRequestsInFlight: -1, MaxMutatingRequestsInFlight: -1, MaxRequestBodyBytes: -1, MaxLongRunningRequestsPerUser: -1, ShutdownDelay: -1}
		}, want: []string{"--max-requests-inflight", "--max-mutating-requests-inflight", "--request-timeout", "--max-resource-write-bytes", "--max-long-running-requests-per-user", "--shutdown-delay-duration", "shutdown timeout", "--access-log-level"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := filters.DefaultConfig()
			tt.modify(&c)
			errs := c.Validate()
			if len(errs) != len(tt.want) {
				t.Fatalf("Validate() = %v, want %d errors", errs, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.Contains(errs[i].Error(), w) {
					t.Errorf("error %d = %q, want it to name %q", i, errs[i], w)
				}
			}
		})
	}
	t.Run("New refuses an invalid config", func(t *testing.T) {
		if _, err := filters.New(filters.Config{}, prometheus.NewRegistry()); err == nil || !strings.Contains(err.Error(), "--request-timeout") {
			t.Errorf("New = %v, want the invalid request timeout", err)
		}
	})
}

func serveRequest(e http.Handler, req *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	return rec
}
