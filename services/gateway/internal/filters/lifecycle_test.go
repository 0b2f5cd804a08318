package filters_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/util/version"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/gateway/internal/filters"
)

func TestHealthEndpoints(t *testing.T) {
	f, _ := newFilters(t, filters.DefaultConfig())
	hook := filters.NewPostStartHook("apiservice-registration-controller")
	e := echo.New()
	for _, h := range f.HealthEndpoints(hook) {
		e.GET("/"+h.Name, echo.WrapHandler(h.Handler))
		e.GET("/"+h.Name+"/*", echo.WrapHandler(h.Handler))
	}
	steps := []struct {
		name   string
		act    func()
		target string
		code   int
		body   string
	}{
		{name: "hook unfinished", act: func() {}, target: "/readyz?verbose", code: 500,
			body: "[+]ping ok\n[+]log ok\n[-]poststarthook/apiservice-registration-controller failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n"},
		{name: "hook's own reason", act: func() {}, target: "/livez/poststarthook/apiservice-registration-controller", code: 500,
			body: "internal server error: not finished\n"},
		{name: "ready", act: hook.Complete, target: "/readyz?verbose", code: 200,
			body: "[+]ping ok\n[+]log ok\n[+]poststarthook/apiservice-registration-controller ok\n[+]shutdown ok\nreadyz check passed\n"},
		{name: "healthz has no shutdown check", act: func() {}, target: "/healthz?verbose", code: 200,
			body: "[+]ping ok\n[+]log ok\n[+]poststarthook/apiservice-registration-controller ok\nhealthz check passed\n"},
		{name: "draining is unready", act: f.Lifecycle().BeginShutdown, target: "/readyz", code: 500,
			body: "[+]ping ok\n[+]log ok\n[+]poststarthook/apiservice-registration-controller ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n"},
		{name: "draining is alive", act: func() {}, target: "/livez", code: 200, body: "ok"},
		{name: "shutdown's own reason", act: func() {}, target: "/readyz/shutdown", code: 500, body: "internal server error: process is shutting down\n"},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.act()
			rec := serve(e, http.MethodGet, s.target, nil)
			if rec.Code != s.code || rec.Body.String() != s.body {
				t.Errorf("GET %s = %d %q, want %d %q", s.target, rec.Code, rec.Body.String(), s.code, s.body)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	rec := serve(filters.VersionHandler(filters.VersionInfo()), http.MethodGet, "/version", nil)
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET /version = %d %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	var got map[string]string
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("decode %q: %v", rec.Body.String(), err)
	}
	for _, k := range []string{"major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"} {
		if _, ok := got[k]; !ok {
			t.Errorf("version lacks %q: %s", k, rec.Body.String())
		}
	}
	// kubectl reads the server's version as a semantic version and warns
	// on a minor skew from major and minor.
	v, err := version.ParseSemantic(got["gitVersion"])
	if err != nil {
		t.Fatalf("gitVersion %q: %v", got["gitVersion"], err)
	}
	if got["major"] != "1" || got["minor"] != "37" || v.Major() != 1 || v.Minor() != 37 {
		t.Errorf("version = %s (major %q, minor %q), want 1.37", v, got["major"], got["minor"])
	}
}

// TestDrain shuts a real server down with a watch and a slow request in
// flight: readiness fails while serving goes on for the delay, then the
// watch ends, and the slow request finishes before Drain returns.
func TestDrain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clock := clocktesting.NewFakeClock(time.Now())
	cfg := filters.DefaultConfig()
	cfg.ShutdownDelay = 10 * time.Second
	f, _ := newFilters(t, cfg, filters.WithClock(clock))
	entered := make(chan struct{})
	release := make(chan struct{})
	e := newEcho(func(c echo.Context) error {
		if c.QueryParam("watch") == "true" {
			c.Response().WriteHeader(http.StatusOK)
			c.Response().Flush()
			entered <- struct{}{}
			<-c.Request().Context().Done()
			return nil
		}
		if c.QueryParam("slow") == "true" {
			entered <- struct{}{}
			<-release
		}
		return ok(c)
	}, f.EndLongRunningOnShutdown())
	for _, h := range f.HealthEndpoints() {
		e.GET("/"+h.Name, echo.WrapHandler(h.Handler))
		e.GET("/"+h.Name+"/*", echo.WrapHandler(h.Handler))
	}
	srv := httptest.NewServer(e)
	defer srv.Close()

	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+path, nil)
		if err != nil {
			return nil, err
		}
		return srv.Client().Do(req)
	}
	watch, err := get("/api/v1/configmaps?watch=true")
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer func() { _ = watch.Body.Close() }()
	<-entered
	slow := make(chan string, 1)
	go func() {
		resp, err := get("/api/v1/configmaps?slow=true")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		slow <- string(b)
	}()
	<-entered

	drained := make(chan error, 1)
	go func() { drained <- f.Lifecycle().Drain(ctx, srv.Config) }()
	for !clock.HasWaiters() {
		select {
		case <-ctx.Done():
			t.Fatal("Drain never waited for the shutdown delay")
		case <-time.After(time.Millisecond):
		}
	}
	resp, err := get("/readyz")
	if err != nil {
		t.Fatalf("readyz during the delay: %v", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("readyz during the delay = %d, want 500", resp.StatusCode)
	}

	clock.Step(cfg.ShutdownDelay)
	if _, err := bufio.NewReader(watch.Body).ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("watch read after the delay = %v, want EOF", err)
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned %v with a request in flight", err)
	default:
	}
	close(release)
	if got := <-slow; got != "done" {
		t.Errorf("slow request = %q, want done", got)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain = %v", err)
	}
}
