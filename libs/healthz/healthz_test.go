package healthz_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"kplane.dev/libs/healthz"
)

func TestHandler(t *testing.T) {
	ping := healthz.Ping()
	etcd := healthz.NamedCheck("etcd", func(*http.Request) error { return errors.New("etcd down") })
	hook := healthz.NamedCheck("poststarthook/start-kube-aggregator-informers", func(*http.Request) error { return nil })
	tests := []struct {
		name, path  string
		checks      []healthz.Checker
		code        int
		body        string
		contentType string
	}{
		{name: "healthy", path: "/readyz", checks: []healthz.Checker{ping}, code: 200, body: "ok", contentType: "text/plain; charset=utf-8"},
		{name: "verbose", path: "/readyz?verbose", checks: []healthz.Checker{ping, healthz.Log(), hook}, code: 200,
			body: "[+]ping ok\n[+]log ok\n[+]poststarthook/start-kube-aggregator-informers ok\nreadyz check passed\n", contentType: "text/plain; charset=utf-8"},
		{name: "failing check is verbose without asking", path: "/readyz", checks: []healthz.Checker{ping, etcd}, code: 500,
			body: "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed\n", contentType: "text/plain; charset=utf-8"},
		{name: "excluded check", path: "/livez?exclude=etcd&exclude=nope&exclude=etcd&exclude=abc&verbose", checks: []healthz.Checker{ping, etcd}, code: 200,
			body: "[+]ping ok\n[+]etcd excluded: ok\nwarn: some health checks cannot be excluded: no matches for \"abc\",\"nope\"\nlivez check passed\n", contentType: "text/plain; charset=utf-8"},
		{name: "one check", path: "/readyz/ping", checks: []healthz.Checker{ping, etcd}, code: 200, body: "ok", contentType: "text/plain; charset=utf-8"},
		{name: "one check with a slash in its name", path: "/readyz/poststarthook/start-kube-aggregator-informers", checks: []healthz.Checker{hook}, code: 200, body: "ok", contentType: "text/plain; charset=utf-8"},
		{name: "one failing check gives its reason", path: "/readyz/etcd", checks: []healthz.Checker{ping, etcd}, code: 500,
			body: "internal server error: etcd down\n", contentType: "text/plain; charset=utf-8"},
		{name: "unknown check", path: "/readyz/nope", checks: []healthz.Checker{ping}, code: 404, body: "404 page not found\n", contentType: "text/plain; charset=utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			endpoint := "readyz"
			if tt.path[:6] == "/livez" {
				endpoint = "livez"
			}
			rec := httptest.NewRecorder()
			healthz.Handler(endpoint, tt.checks...).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("%s = %d %q, want %d %q", tt.path, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
			if got := rec.Header().Get("Content-Type"); got != tt.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tt.contentType)
			}
		})
	}
}
