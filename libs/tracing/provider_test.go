package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"kplane.dev/libs/tracing"
)

// keptSpans is an in-memory exporter that keeps its spans when the
// provider shuts down (flushing them), where InMemoryExporter drops them.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// TestHandlerContinuesClientTrace: a request carrying a sampled
// traceparent is served in the client's trace, under the client's span,
// even when the server's own sampler would sample nothing; the transport
// then sends the server's span on to the next hop.
func TestHandlerContinuesClientTrace(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	p := tracing.NewWithExporter(exp, sdktrace.ParentBased(sdktrace.NeverSample()), resource.Empty())
	var sent string
	next := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { sent = r.Header.Get("traceparent") }))
	defer next.Close()
	client := &http.Client{Transport: p.Transport(http.DefaultTransport)}
	srv := httptest.NewServer(p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, next.URL, nil)
		if err != nil {
			t.Error(err)
			return
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		_ = resp.Body.Close()
	}), "op"))
	defer srv.Close()

	const traceID, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var server, call tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		switch s.SpanKind {
		case trace.SpanKindServer:
			server = s
		case trace.SpanKindClient:
			call = s
		}
	}
	if server.SpanContext.TraceID().String() != traceID || server.Parent.SpanID().String() != clientSpan || !server.Parent.IsRemote() {
		t.Fatalf("server span in trace %s under %s, want the client's %s under %s", server.SpanContext.TraceID(), server.Parent.SpanID(), traceID, clientSpan)
	}
	if call.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("the outgoing call's span is under %s, want the server span %s", call.Parent.SpanID(), server.SpanContext.SpanID())
	}
	if want := "00-" + traceID + "-" + call.SpanContext.SpanID().String() + "-01"; sent != want {
		t.Fatalf("the next hop got traceparent %q, want %q", sent, want)
	}
}

// TestExportsOverOTLPHTTP: a Provider configured with an OTLP/HTTP
// endpoint sends its spans there, under the service's name, and flushes
// them when it shuts down.
func TestExportsOverOTLPHTTP(t *testing.T) {
	var (
		mu       sync.Mutex
		services []string
		names    []string
	)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
		mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	defer receiver.Close()
	o := tracing.NewOptions()
	o.Endpoint, o.Protocol = receiver.URL, tracing.ProtocolHTTPProtobuf
	cfg, err := o.Config(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p, err := tracing.New(context.Background(), cfg, tracing.Resource{Name: "kplane-test", Version: "v1"})
	if err != nil || !p.Enabled() {
		t.Fatalf("New with an endpoint = %v, %v", p, err)
	}
	_, span := p.Start(context.Background(), "test", "exported")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) != 1 || names[0] != "exported" || len(services) != 1 || services[0] != "kplane-test" {
		t.Fatalf("the receiver got spans %q of services %q, want exported of kplane-test", names, services)
	}
}
