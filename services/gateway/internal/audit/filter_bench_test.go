package audit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/audit"
	"kplane.dev/services/gateway/internal/audit/backend"
	"kplane.dev/services/gateway/internal/audit/policy"
)

// BenchmarkFilter measures what auditing a create, a get and an update
// (whose body has managed fields) costs the gateway, to a log file, at
// each level, with managed fields omitted as make up's policy omits them:
// the filter and the backend's encoding and writing, without the network
// and the backends behind the gateway.
func BenchmarkFilter(b *testing.B) {
	// kplane-load's ConfigMap: 1 KiB of data.
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"},"data":{"k":"` + strings.Repeat("v", 1024) + `"}}`
	updateBody := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","resourceVersion":"12","managedFields":[{"manager":"kplane-load","operation":"Update","apiVersion":"v1","time":"2026-11-28T15:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}}}]},"data":{"k":"` + strings.Repeat("w", 1024) + `"}}`
	for _, level := range []string{"None", "Metadata", "Request", "RequestResponse"} {
		for _, op := range []string{"create", "get", "update"} {
			b.Run(op+"/level="+level, func(b *testing.B) {
				p, err := policy.Parse([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nomitManagedFields: true\nrules: [{level: " + level + "}]\n"))
				if err != nil {
					b.Fatal(err)
				}
				log := backend.NewLogFile(filepath.Join(b.TempDir(), "audit.log"))
				a, err := audit.New(policy.New(p), []audit.Backend{{Name: "log", Sink: log, BufferSize: 10000, MaxBatchSize: 400}}, prometheus.NewRegistry())
				if err != nil {
					b.Fatal(err)
				}
				e := echo.New()
				e.Use(audit.WithID)
				e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
					return func(c echo.Context) error {
						r := c.Request()
						c.SetRequest(r.WithContext(frontproxy.WithUser(r.Context(), &frontproxy.User{Name: "admin", Groups: []string{"system:masters"}})))
						return next(c)
					}
				})
				e.Use(a.Filter)
				answer := func(code int) echo.HandlerFunc {
					return func(c echo.Context) error {
						if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
							return err
						}
						return c.Blob(code, "application/json", []byte(body))
					}
				}
				e.POST("/api/v1/namespaces/default/configmaps", answer(http.StatusCreated))
				e.GET("/api/v1/namespaces/default/configmaps/c", answer(http.StatusOK))
				e.PUT("/api/v1/namespaces/default/configmaps/c", answer(http.StatusOK))
				b.ReportAllocs()
				for b.Loop() {
					var req *http.Request
					switch op {
					case "create":
						req = httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
					case "update":
						req = httptest.NewRequest(http.MethodPut, "/api/v1/namespaces/default/configmaps/c", strings.NewReader(updateBody))
						req.Header.Set("Content-Type", "application/json")
					default:
						req = httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/default/configmaps/c", nil)
					}
					e.ServeHTTP(httptest.NewRecorder(), req)
				}
				b.StopTimer()
				if err := a.Close(context.Background()); err != nil {
					b.Fatal(err)
				}
				if err := log.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}
