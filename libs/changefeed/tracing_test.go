package changefeed_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/tracing"
	proto "kplane.dev/proto/changefeed"
)

// keptSpans is an in-memory exporter that keeps its spans when the
// provider shuts down (flushing them), where InMemoryExporter drops them.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// TestTraceContextTravelsWithChanges: each change's message carries the
// trace context of the publisher's span, and a traced subscriber handles
// it in a span of that trace, a child of the publisher's.
func TestTraceContextTravelsWithChanges(t *testing.T) {
	f := newFixture(t)
	pubSpans, subSpans := keptSpans{tracetest.NewInMemoryExporter()}, keptSpans{tracetest.NewInMemoryExporter()}
	pub := tracing.NewWithExporter(pubSpans, sdktrace.AlwaysSample(), resource.Empty())
	sub := tracing.NewWithExporter(subSpans, sdktrace.ParentBased(sdktrace.NeverSample()), resource.Empty())
	f.runPublisher(t, changefeed.WithTracing(pub))
	handled := make(chan trace.SpanContext, 1)
	runUntilStopped(t, func(ctx context.Context) error {
		return changefeed.Subscribe(ctx, f.js, proto.StreamSubjects, 0, func(ctx context.Context, e proto.Event) error {
			if e.Name == "traced" {
				handled <- trace.SpanContextFromContext(ctx)
			}
			return nil
		}, changefeed.Traced(sub))
	})
	f.create(t, "traced")
	var sc trace.SpanContext
	select {
	case sc = <-handled:
	case <-time.After(wait):
		t.Fatal("the change was not handed to the subscriber")
	}
	for _, p := range []*tracing.Provider{pub, sub} {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	var published, processed tracetest.SpanStub
	for _, s := range pubSpans.GetSpans() {
		if s.SpanKind == trace.SpanKindProducer && s.SpanContext.TraceID() == sc.TraceID() {
			published = s
		}
	}
	for _, s := range subSpans.GetSpans() {
		if s.SpanContext.SpanID() == sc.SpanID() {
			processed = s
		}
	}
	if !sc.IsSampled() || !published.SpanContext.IsValid() {
		t.Fatalf("the handler ran in trace %s (sampled %v), which no publisher span started", sc.TraceID(), sc.IsSampled())
	}
	if processed.SpanKind != trace.SpanKindConsumer || processed.Parent.SpanID() != published.SpanContext.SpanID() || !processed.Parent.IsRemote() {
		t.Fatalf("the subscriber's span %q (%v) is under %s, want a consumer span under the publisher's %s", processed.Name, processed.SpanKind, processed.Parent.SpanID(), published.SpanContext.SpanID())
	}
}
