package tracing

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
)

// shutdownTimeout bounds the flush of the spans still queued when a
// service stops: a receiver that is gone must not hold the exit.
const shutdownTimeout = 5 * time.Second

// Provider makes a service's spans and carries their context across hops.
// A nil Provider is tracing turned off.
type Provider struct {
	sdk        *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
}

// Resource names the service that makes the spans.
type Resource struct {
	// Name is service.name, unless OTEL_SERVICE_NAME says otherwise.
	Name    string
	Version string
}

// New is the Provider cfg configures for the service res names, or nil
// when cfg has no endpoint. OTEL_RESOURCE_ATTRIBUTES and
// OTEL_SERVICE_NAME add to and override res.
func New(ctx context.Context, cfg *Config, res Resource) (*Provider, error) {
	if cfg.Endpoint == "" {
		return nil, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case ProtocolHTTPProtobuf:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	default:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter of %s: %w", cfg.Endpoint, err)
	}
	r, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(res.Name), semconv.ServiceVersion(res.Version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	return NewWithExporter(exp, cfg.Sampler, r), nil
}

// NewWithExporter is a Provider that batches its sampled spans to exp;
// tests give it an in-memory exporter.
func NewWithExporter(exp sdktrace.SpanExporter, sampler sdktrace.Sampler, r *resource.Resource) *Provider {
	return &Provider{
		sdk: sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exp),
			sdktrace.WithSampler(sampler),
			sdktrace.WithResource(r),
		),
		propagator: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
}

// Shutdown sends the spans still queued and stops the exporter, giving up
// after a few seconds even when ctx has ended (it usually has: the
// service is stopping).
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := p.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("flush traces: %w", err)
	}
	return nil
}

// Enabled says whether p makes spans.
func (p *Provider) Enabled() bool { return p != nil }

// Inject writes the trace context of ctx into c (NATSHeader for a NATS
// message).
func (p *Provider) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	if p != nil {
		p.propagator.Inject(ctx, c)
	}
}

// Extract is ctx with the trace context that c carries.
func (p *Provider) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	if p == nil {
		return ctx
	}
	return p.propagator.Extract(ctx, c)
}

// Start starts a span of scope name when p is enabled; with p nil it
// returns ctx and a span that does nothing, without allocating.
func (p *Provider) Start(ctx context.Context, scope, spanName string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if p == nil {
		return ctx, noSpan
	}
	return p.sdk.Tracer(scope).Start(ctx, spanName, opts...)
}

// noSpan is the span of a nil Provider.
var noSpan = trace.SpanFromContext(context.Background())

// Handler is h behind a server span named operation that continues the
// trace context of the request's headers (a client's traceparent is
// honoured, as kube honours it). With p nil, it is h.
func (p *Provider) Handler(h http.Handler, operation string, opts ...otelhttp.Option) http.Handler {
	if p == nil {
		return h
	}
	return otelhttp.NewHandler(h, operation, append(p.otelhttpOptions(), opts...)...)
}

// Transport is rt sending the trace context of each request's context in
// its headers, under a client span. With p nil, it is rt.
func (p *Provider) Transport(rt http.RoundTripper, opts ...otelhttp.Option) http.RoundTripper {
	if p == nil {
		return rt
	}
	return otelhttp.NewTransport(rt, append(p.otelhttpOptions(), opts...)...)
}

// otelhttpOptions keep otelhttp off the globals: its metrics go nowhere
// (Prometheus has the services' request metrics).
func (p *Provider) otelhttpOptions() []otelhttp.Option {
	return []otelhttp.Option{
		otelhttp.WithTracerProvider(p.sdk),
		otelhttp.WithPropagators(p.propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
	}
}
