package filters_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/gateway/internal/filters"
)

// TestAccessLog: one line per request with kube httplog's fields, the
// code an error became, the user named inside the chain, and nothing at a
// level the logger drops.
func TestAccessLog(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	slow := func(c echo.Context) error {
		clock.Step(42 * time.Millisecond)
		c.Response().Header().Set("Audit-ID", "a1")
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x")
	}
	tests := []struct {
		name     string
		level    string
		logLevel slog.Level
		handler  echo.HandlerFunc
		want     map[string]any
	}{
		{name: "an error's code", level: "info", logLevel: slog.LevelInfo, handler: slow, want: map[string]any{
			"level": "INFO", "msg": "HTTP", "verb": "GET", "uri": "/api/v1/namespaces/default/configmaps/x?timeout=5s", "user": "alice",
			"code": 404.0, "latency": float64(42 * time.Millisecond), "user_agent": "kubectl/v1.32", "src_ip": "192.0.2.1", "audit_id": "a1",
		}},
		{name: "a success at debug", level: "debug", logLevel: slog.LevelDebug, handler: ok, want: map[string]any{"level": "DEBUG", "code": 200.0, "audit_id": ""}},
		{name: "below the log level", level: "debug", logLevel: slog.LevelInfo, handler: ok},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cfg := filters.DefaultConfig()
			cfg.AccessLogLevel = tt.level
			f, _ := newFilters(t, cfg,
				filters.WithLogger(slog.New(slog.NewJSONHandler(&out, &slog.HandlerOptions{Level: tt.logLevel}))),
				filters.WithClock(clock),
				filters.WithUserName(func(c echo.Context) string { return c.Get("user").(string) }))
			// The user is named by a filter inside the access log, as
			// authentication is in the gateway.
			authenticate := func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error { c.Set("user", "alice"); return next(c) }
			}
			e := newEcho(tt.handler, f.AccessLog(), authenticate)
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps/x?timeout=5s", nil)
			req.RemoteAddr = "192.0.2.1:51234"
			req.Header.Set("User-Agent", "kubectl/v1.32")
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if tt.want == nil {
				if out.Len() != 0 {
					t.Fatalf("logged %q", out.String())
				}
				return
			}
			var line map[string]any
			if err := json.Unmarshal(out.Bytes(), &line); err != nil {
				t.Fatalf("want one JSON line, got %q: %v", out.String(), err)
			}
			if got := rec.Code; float64(got) != tt.want["code"] {
				t.Errorf("answered %d, logged %v", got, tt.want["code"])
			}
			for k, v := range tt.want {
				if line[k] != v {
					t.Errorf("%s = %v, want %v (line %s)", k, line[k], v, out.String())
				}
			}
		})
	}
}

func TestAccessLogLevelFlag(t *testing.T) {
	cfg := filters.DefaultConfig()
	if cfg.AccessLogLevel != "info" {
		t.Errorf("default --access-log-level %q, want info", cfg.AccessLogLevel)
	}
	cfg.AccessLogLevel = "loud"
	errs := cfg.Validate()
	if len(errs) != 1 || errs[0].Error() != `--access-log-level: want debug, info, warn or error, got "loud"` {
		t.Errorf("errors %v", errs)
	}
}
