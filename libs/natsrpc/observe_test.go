package natsrpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/tracing"
)

// keptSpans is an in-memory exporter that keeps its spans when the
// provider shuts down (flushing them), where InMemoryExporter drops them.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// recordingObserver is an Observer whose sampled spans land in the
// returned exporter once flushed with the provider.
func recordingObserver(t testing.TB, sampler sdktrace.Sampler, reg prometheus.Registerer) (*natsrpc.Observer, *tracing.Provider, keptSpans) {
	t.Helper()
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	tp := tracing.NewWithExporter(exp, sampler, resource.Empty())
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs, err := natsrpc.NewObserver(tp, reg)
	if err != nil {
		t.Fatal(err)
	}
	return obs, tp, exp
}

// TestTraceContextCrossesNATS: the replica's server span is a child of the
// requester's client span, which is a child of the span the caller was
// in, so that one trace covers both sides of the hop; an error reply
// marks both spans failed.
func TestTraceContextCrossesNATS(t *testing.T) {
	srv := natstest.Start(t)
	clientObs, clientTP, clientSpans := recordingObserver(t, sdktrace.AlwaysSample(), prometheus.NewRegistry())
	serverObs, serverTP, serverSpans := recordingObserver(t, sdktrace.ParentBased(sdktrace.NeverSample()), prometheus.NewRegistry())
	seen := make(chan trace.SpanContext, 2)
	serve(t, srv, "test.traced", func(ctx context.Context, p []byte) ([]byte, error) {
		seen <- trace.SpanContextFromContext(ctx)
		if string(p) == "fail" {
			return nil, apierrors.NewForbidden(schema.GroupResource{}, "x", nil)
		}
		return p, nil
	}, natsrpc.WithObserver(serverObs))
	nc := srv.Connect(t)

	ctx, parent := clientTP.Start(context.Background(), "test", "caller")
	if _, err := natsrpc.Request(ctx, nc, "test.traced", []byte("ok"), natsrpc.Observe(clientObs)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsrpc.Request(ctx, nc, "test.traced", []byte("fail"), natsrpc.Observe(clientObs)); !apierrors.IsForbidden(err) {
		t.Fatalf("error reply: %v", err)
	}
	parent.End()
	for range 2 {
		if sc := <-seen; sc.TraceID() != parent.SpanContext().TraceID() || !sc.IsSampled() {
			t.Fatalf("the handler ran in trace %s (sampled %v), want %s sampled", sc.TraceID(), sc.IsSampled(), parent.SpanContext().TraceID())
		}
	}
	// The server's own sampler never samples a root: its spans exist only
	// because the requester's sampled decision travelled with the request.
	flush(t, clientTP, serverTP)
	clients := spansNamed(clientSpans.GetSpans(), "send test.traced")
	servers := spansNamed(serverSpans.GetSpans(), "process test.traced")
	if len(clients) != 2 || len(servers) != 2 {
		t.Fatalf("got %d client and %d server spans, want 2 and 2", len(clients), len(servers))
	}
	for i := range 2 {
		c, s := clients[i], servers[i]
		if c.Parent.SpanID() != parent.SpanContext().SpanID() || c.SpanKind != trace.SpanKindClient {
			t.Fatalf("client span %d: parent %s kind %v, want the caller's %s, client", i, c.Parent.SpanID(), c.SpanKind, parent.SpanContext().SpanID())
		}
		if s.Parent.SpanID() != c.SpanContext.SpanID() || s.SpanKind != trace.SpanKindServer || !s.Parent.IsRemote() {
			t.Fatalf("server span %d: parent %s kind %v, want the client span %s, server", i, s.Parent.SpanID(), s.SpanKind, c.SpanContext.SpanID())
		}
		if got := attr(s, "messaging.destination.name"); got != "test.traced" {
			t.Fatalf("server span destination %q", got)
		}
	}
	if clients[1].Status.Code.String() != "Error" || servers[1].Status.Code.String() != "Error" || attr(clients[1], "error.type") != "403" {
		t.Fatalf("an error reply: client %v %q, server %v", clients[1].Status, attr(clients[1], "error.type"), servers[1].Status)
	}
}

// TestRequestWithoutObserverCarriesNoContext: without an Observer a
// request sends no trace headers, so that tracing turned off costs the
// hop nothing.
func TestRequestWithoutObserverCarriesNoContext(t *testing.T) {
	srv := natstest.Start(t)
	_, tp, _ := recordingObserver(t, sdktrace.AlwaysSample(), prometheus.NewRegistry())
	sub, err := srv.Connect(t).SubscribeSync("test.plain")
	if err != nil {
		t.Fatal(err)
	}
	nc := srv.Connect(t)
	ctx, span := tp.Start(context.Background(), "test", "caller")
	defer span.End()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _ = natsrpc.Request(short, nc, "test.plain", nil)
	m, err := sub.NextMsg(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if v := m.Header.Get("traceparent"); v != "" {
		t.Fatalf("traceparent %q without an observer", v)
	}
}

// TestRequestMetrics counts requests by subject and outcome.
func TestRequestMetrics(t *testing.T) {
	srv := natstest.Start(t)
	reg := prometheus.NewRegistry()
	obs, _, _ := recordingObserver(t, sdktrace.NeverSample(), reg)
	serve(t, srv, "test.m", func(_ context.Context, p []byte) ([]byte, error) {
		if len(p) == 0 {
			return nil, apierrors.NewBadRequest("empty")
		}
		return p, nil
	})
	nc := srv.Connect(t)
	ctx := context.Background()
	for _, p := range []string{"a", "b", ""} {
		_, _ = natsrpc.Request(ctx, nc, "test.m", []byte(p), natsrpc.Observe(obs))
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, _ = natsrpc.Request(short, nc, "test.nobody", nil, natsrpc.Observe(obs))
	want := `
# HELP kplane_natsrpc_requests_total Requests sent over NATS, by subject and outcome.
# TYPE kplane_natsrpc_requests_total counter
kplane_natsrpc_requests_total{outcome="error",subject="test.m"} 1
kplane_natsrpc_requests_total{outcome="success",subject="test.m"} 2
kplane_natsrpc_requests_total{outcome="unavailable",subject="test.nobody"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "kplane_natsrpc_requests_total"); err != nil {
		t.Fatal(err)
	}
	if n := testutil.CollectAndCount(reg, "kplane_natsrpc_request_duration_seconds"); n != 3 {
		t.Fatalf("%d duration series, want 3", n)
	}
}

func flush(t *testing.T, tps ...*tracing.Provider) {
	t.Helper()
	for _, tp := range tps {
		if err := tp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func spansNamed(spans tracetest.SpanStubs, name string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) string {
	for _, a := range s.Attributes {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}
