package rest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// BenchmarkDeleteOptions measures reading the DeleteOptions body that
// client-go sends with every delete.
func BenchmarkDeleteOptions(b *testing.B) {
	e := echo.New()
	const body = `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}`
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodDelete, "/api/v1/namespaces/ns/configmaps/a", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		opts, err := deleteOptions(e.NewContext(req, httptest.NewRecorder()))
		if err != nil || opts.PropagationPolicy == nil {
			b.Fatalf("options %v: %v", opts, err)
		}
	}
}
