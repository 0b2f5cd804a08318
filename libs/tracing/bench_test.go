package tracing_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"kplane.dev/libs/tracing"
)

// BenchmarkHandler is what a service's tracing handler adds to a request
// that does nothing: with tracing off (no Provider), with a Provider
// whose sampler samples nothing, and with one that samples every request.
func BenchmarkHandler(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{name: "tracing-off"},
		{name: "sampled-none", sampler: sdktrace.ParentBased(sdktrace.NeverSample())},
		{name: "sampled-all", sampler: sdktrace.ParentBased(sdktrace.AlwaysSample())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var p *tracing.Provider
			if bc.sampler != nil {
				p = tracing.NewWithExporter(tracetest.NewNoopExporter(), bc.sampler, resource.Empty())
			}
			h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }), "op")
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}
