package filters_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"kplane.dev/services/gateway/internal/filters"
)

func TestBodyLimit(t *testing.T) {
	tooLarge := func(limit int) string {
		return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is %d","reason":"RequestEntityTooLarge","code":413}`+"\n", limit)
	}
	tests := []struct {
		name    string
		limit   int64
		method  string
		target  string
		size    int
		chunked bool
		code    int
		body    string
	}{
		{name: "kube's limit", limit: filters.DefaultMaxRequestBodyBytes, method: http.MethodPost, target: "/api/v1/namespaces/default/configmaps",
			size: filters.DefaultMaxRequestBodyBytes + 1, code: 413, body: tooLarge(3145728)},
		{name: "at the limit", limit: 10, method: http.MethodPut, target: "/api/v1/namespaces/default/configmaps/a", size: 10, code: 200, body: "read 10"},
		{name: "patch over the limit", limit: 10, method: http.MethodPatch, target: "/apis/apps/v1/namespaces/default/deployments/a", size: 11, code: 413, body: tooLarge(10)},
		{name: "chunked over the limit", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces", size: 11, chunked: true, code: 413, body: tooLarge(10)},
		{name: "chunked under the limit reaches the handler whole", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces", size: 9, chunked: true, code: 200, body: "read 9"},
		{name: "delete options over the limit", limit: 10, method: http.MethodDelete, target: "/api/v1/namespaces/a", size: 11, code: 413, body: tooLarge(10)},
		{name: "streaming exec is not limited", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces/default/pods/p/exec", size: 11, code: 200, body: "read 11"},
		{name: "no limit", limit: 0, method: http.MethodPost, target: "/api/v1/namespaces", size: 11, code: 200, body: "read 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filters.DefaultConfig()
			cfg.MaxRequestBodyBytes = tt.limit
			f, _ := newFilters(t, cfg)
			e := newEcho(func(c echo.Context) error {
				b, err := io.ReadAll(c.Request().Body)
				if err != nil {
					return err
				}
				return c.String(http.StatusOK, fmt.Sprintf("read %d", len(b)))
			}, f.BodyLimit())
			var body io.Reader = bytes.NewReader([]byte(strings.Repeat("x", tt.size)))
			if tt.chunked {
				// Hiding the reader's type leaves the length unknown.
				body = io.MultiReader(body)
			}
			req := httptest.NewRequest(tt.method, tt.target, body)
			if tt.chunked {
				req.ContentLength = -1
			}
			rec := serveRequest(e, req)
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.target, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
		})
	}
}
