package filters_test

import (
	"net/http"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"kplane.dev/services/gateway/internal/filters"
)

// TestLongRunningPerUser holds a user's watches up to the limit: the next
// one is kube's 429 with Retry-After, while other users, privileged ones,
// and short requests of the same user are served; a closed watch frees
// its place.
func TestLongRunningPerUser(t *testing.T) {
	cfg := filters.DefaultConfig()
	cfg.MaxLongRunningRequestsPerUser = 2
	f, _ := newFilters(t, cfg,
		filters.WithUserName(func(c echo.Context) string { return c.Request().Header.Get("X-Test-User") }),
		filters.WithPrivileged(func(c echo.Context) bool { return c.Request().Header.Get("X-Test-User") == "root" }))
	entered := make(chan struct{})
	release := make(chan struct{})
	e := newEcho(func(c echo.Context) error {
		if c.QueryParam("hold") == "true" {
			entered <- struct{}{}
			<-release
		}
		return ok(c)
	}, f.LongRunningPerUser())
	request := func(user, target string) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		req.Header.Set("X-Test-User", user)
		return req
	}
	const watch = "/api/v1/namespaces/default/configmaps?watch=true"

	var wg sync.WaitGroup
	for _, target := range []string{watch + "&hold=true", "/api/v1/namespaces/default/pods/p/log?hold=true"} {
		wg.Go(func() { serveRequest(e, request("bob", target)) })
		<-entered
	}

	const tooMany = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}` + "\n"
	tests := []struct {
		name, user, target string
		code               int
	}{
		{name: "over the user's limit", user: "bob", target: watch, code: 429},
		{name: "exec counts too", user: "bob", target: "/api/v1/namespaces/default/pods/p/exec", code: 429},
		{name: "other user", user: "carol", target: watch, code: 200},
		{name: "privileged user", user: "root", target: watch, code: 200},
		{name: "short request of the user", user: "bob", target: "/api/v1/namespaces/default/configmaps", code: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serveRequest(e, request(tt.user, tt.target))
			if rec.Code != tt.code {
				t.Fatalf("GET %s as %s = %d %q, want %d", tt.target, tt.user, rec.Code, rec.Body.String(), tt.code)
			}
			if tt.code != 429 {
				return
			}
			if rec.Body.String() != tooMany || rec.Header().Get("Retry-After") != "1" || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("429 = %q, Retry-After %q, Content-Type %q; want kube's Status with Retry-After 1",
					rec.Body.String(), rec.Header().Get("Retry-After"), rec.Header().Get("Content-Type"))
			}
		})
	}
	close(release)
	wg.Wait()
	t.Run("closed watches free their places", func(t *testing.T) {
		if rec := serveRequest(e, request("bob", watch)); rec.Code != 200 {
			t.Errorf("watch after the others closed = %d %q, want 200", rec.Code, rec.Body.String())
		}
	})
	t.Run("no limit", func(t *testing.T) {
		cfg.MaxLongRunningRequestsPerUser = 0
		f, _ := newFilters(t, cfg, filters.WithUserName(func(echo.Context) string { return "bob" }))
		if rec := serveRequest(newEcho(ok, f.LongRunningPerUser()), request("bob", watch)); rec.Code != 200 {
			t.Errorf("watch without a limit = %d", rec.Code)
		}
	})
}
