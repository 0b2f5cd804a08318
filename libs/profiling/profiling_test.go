package profiling_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"kplane.dev/libs/profiling"
)

// TestHandler: the index, a named profile, a CPU profile and the
// redirect of the bare path are served.
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(profiling.Handler(false))
	defer srv.Close()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	tests := []struct {
		path string
		code int
		want string
	}{
		{path: "/debug/pprof/", code: http.StatusOK, want: "goroutine"},
		{path: "/debug/pprof/goroutine?debug=1", code: http.StatusOK, want: "goroutine profile: total"},
		{path: "/debug/pprof/heap?debug=1", code: http.StatusOK, want: "heap profile"},
		{path: "/debug/pprof/profile?seconds=1", code: http.StatusOK},
		{path: "/debug/pprof", code: http.StatusMovedPermanently},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := client.Get(srv.URL + tt.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.code || !strings.Contains(string(body), tt.want) {
				t.Errorf("GET %s: %d, want %d with %q:\n%.300s", tt.path, resp.StatusCode, tt.code, tt.want, body)
			}
			if tt.code == http.StatusMovedPermanently && resp.Header.Get("Location") != profiling.Path {
				t.Errorf("redirected to %q", resp.Header.Get("Location"))
			}
		})
	}
}

// TestContention: asking for contention profiles turns on the sampling
// of mutex events, without which the mutex profile stays empty.
func TestContention(t *testing.T) {
	defer runtime.SetMutexProfileFraction(runtime.SetMutexProfileFraction(0))
	defer runtime.SetBlockProfileRate(0)
	profiling.Handler(true)
	if got := runtime.SetMutexProfileFraction(-1); got != 1 {
		t.Errorf("mutex profile fraction %d, want 1", got)
	}
}
