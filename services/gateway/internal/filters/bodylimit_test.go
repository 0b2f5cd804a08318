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
		{name: "chunked far over the limit", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces", size: 1 << 20, chunked: true, code: 413, body: tooLarge(10)},
		{name: "chunked at the limit reaches the handler whole", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces", size: 10, chunked: true, code: 200, body: "read 10"},
		{name: "delete options over the limit", limit: 10, method: http.MethodDelete, target: "/api/v1/namespaces/a", size: 11, code: 413, body: tooLarge(10)},
		{name: "non-resource write over the limit", limit: 10, method: http.MethodPost, target: "/foo", size: 11, chunked: true, code: 413, body: tooLarge(10)},
		{name: "subresource write over the limit", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces/default/serviceaccounts/a/token", size: 11, code: 413, body: tooLarge(10)},
		{name: "GET body is dropped unread", limit: 10, method: http.MethodGet, target: "/api/v1/namespaces/default/configmaps", size: 11, chunked: true, code: 200, body: "read 0"},
		{name: "GET body under the limit is dropped too", limit: 10, method: http.MethodGet, target: "/api/v1/namespaces/default/configmaps/a", size: 5, code: 200, body: "read 0"},
		{name: "watch body is dropped", limit: 10, method: http.MethodGet, target: "/api/v1/namespaces/default/configmaps?watch=true", size: 11, code: 200, body: "read 0"},
		{name: "HEAD body is dropped", limit: 10, method: http.MethodHead, target: "/api/v1/namespaces", size: 11, code: 200, body: "read 0"},
		{name: "GET body is dropped without a limit", limit: 0, method: http.MethodGet, target: "/api/v1/namespaces", size: 11, chunked: true, code: 200, body: "read 0"},
		{name: "streaming exec is not limited", limit: 10, method: http.MethodPost, target: "/api/v1/namespaces/default/pods/p/exec", size: 11, code: 200, body: "read 11"},
		{name: "no limit", limit: 0, method: http.MethodPost, target: "/api/v1/namespaces", size: 11, chunked: true, code: 200, body: "read 11"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filters.DefaultConfig()
			cfg.MaxRequestBodyBytes = tt.limit
			f, _ := newFilters(t, cfg)
			e := newEcho(func(c echo.Context) error {
				r := c.Request()
				b, err := io.ReadAll(r.Body)
				if err != nil {
					return err
				}
				if len(b) == 0 && (r.ContentLength != 0 || r.TransferEncoding != nil) {
					return fmt.Errorf("empty body of length %d, %v", r.ContentLength, r.TransferEncoding)
				}
				return c.String(http.StatusOK, fmt.Sprintf("read %d", len(b)))
			}, f.BodyLimit())
			sent := &countingReader{r: bytes.NewReader([]byte(strings.Repeat("x", tt.size)))}
			var body io.Reader = sent
			if tt.chunked {
				// Hiding the reader's type leaves the length unknown.
				body = io.MultiReader(body)
			}
			req := httptest.NewRequest(tt.method, tt.target, body)
			if tt.chunked {
				req.ContentLength = -1
				req.TransferEncoding = []string{"chunked"}
			}
			rec := serveRequest(e, req)
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("%s %s = %d %q, want %d %q", tt.method, tt.target, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
			// Streamed, never read ahead: at most one byte past the
			// limit (and a read's buffer) is taken from the client.
			if tt.limit > 0 && sent.n > tt.limit+32<<10 {
				t.Errorf("read %d bytes of the client's body, limit %d", sent.n, tt.limit)
			}
		})
	}
}

// countingReader counts the bytes read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
