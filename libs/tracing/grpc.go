package tracing

import (
	"context"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
)

// GRPCDialOptions trace a gRPC client's calls (the etcd client's) made
// within a traced operation, as children of its span. Calls made outside
// one (leases, compaction, the watch cache's own watches) start no
// traces: they would bury the requests' traces under their own. Without
// p, there are none.
func (p *Provider) GRPCDialOptions() []grpc.DialOption {
	if p == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(childrenOnly{otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(p.sdk),
		otelgrpc.WithPropagators(p.propagator),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider()),
	)})}
}

// childrenOnly passes on to its handler only the calls whose context
// holds a span.
type childrenOnly struct{ stats.Handler }

// untraced marks the context of a call childrenOnly leaves alone.
type untraced struct{}

func (h childrenOnly) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return context.WithValue(ctx, untraced{}, true)
	}
	return h.Handler.TagRPC(ctx, info)
}

func (h childrenOnly) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if ctx.Value(untraced{}) == nil {
		h.Handler.HandleRPC(ctx, s)
	}
}
