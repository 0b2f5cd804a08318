package natsrpc

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/tracing"
)

// scope is the instrumentation scope of natsrpc's spans.
const scope = "kplane.dev/libs/natsrpc"

// Outcomes of a request, the outcome label of the request metrics: a
// small fixed set, whatever the error.
const (
	OutcomeSuccess = "success"
	// OutcomeError: a replica answered with an error.
	OutcomeError = "error"
	// OutcomeUnavailable: no replica took the request, or the one that
	// took it died.
	OutcomeUnavailable = "unavailable"
	// OutcomeTimeout: the requester's deadline passed.
	OutcomeTimeout = "timeout"
)

// Observer is what a service's requests and replies report to: spans on
// its tracing Provider, request metrics on its registry. A nil Observer
// reports nothing.
type Observer struct {
	tracing  *tracing.Provider
	duration *prometheus.HistogramVec
	total    *prometheus.CounterVec
}

// NewObserver is an Observer that makes spans with tp (nil: none) and
// registers the request metrics on reg (nil: nowhere, for a service
// without a registry).
func NewObserver(tp *tracing.Provider, reg prometheus.Registerer) (*Observer, error) {
	o := &Observer{
		tracing: tp,
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kplane",
			Subsystem: "natsrpc",
			Name:      "request_duration_seconds",
			Help:      "Time from sending a request over NATS to its reply, retries included, by subject and outcome.",
			Buckets:   prometheus.ExponentialBuckets(0.0005, 2, 15),
		}, []string{"subject", "outcome"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane",
			Subsystem: "natsrpc",
			Name:      "requests_total",
			Help:      "Requests sent over NATS, by subject and outcome.",
		}, []string{"subject", "outcome"}),
	}
	if reg == nil {
		return o, nil
	}
	for _, c := range []prometheus.Collector{o.duration, o.total} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// Observe makes a request report to o.
func Observe(o *Observer) RequestOption { return func(r *requestOptions) { r.observer = o } }

// WithObserver makes a Server's replies report to o.
func WithObserver(o *Observer) ServerOption { return func(s *Server) { s.observer = o } }

// startRequest starts the client span of a request on subject.
func (o *Observer) startRequest(ctx context.Context, subject string, size int) (context.Context, trace.Span) {
	if o == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	return o.tracing.Start(ctx, scope, "send "+subject,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingOperationName("send"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingMessageBodySize(size),
		))
}

// inject puts the trace context of ctx in a request's headers.
func (o *Observer) inject(ctx context.Context, h nats.Header) {
	if o != nil {
		o.tracing.Inject(ctx, tracing.NATSHeader(h))
	}
}

// endRequest ends a request's span and counts it.
func (o *Observer) endRequest(span trace.Span, subject, outcome string, attempts int, start time.Time, err error) {
	if o == nil {
		return
	}
	o.duration.WithLabelValues(subject, outcome).Observe(time.Since(start).Seconds())
	o.total.WithLabelValues(subject, outcome).Inc()
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attribute.Int("kplane.natsrpc.attempts", attempts), attribute.String("kplane.natsrpc.outcome", outcome))
	endWithError(span, err)
}

// startServe starts the server span of a request a replica took, in the
// trace its requester sent.
func (o *Observer) startServe(ctx context.Context, m *nats.Msg, queue string) (context.Context, trace.Span) {
	if o == nil {
		return ctx, trace.SpanFromContext(ctx)
	}
	ctx = o.tracing.Extract(ctx, tracing.NATSHeader(m.Header))
	return o.tracing.Start(ctx, scope, "process "+m.Subject,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationName(m.Subject),
			semconv.MessagingConsumerGroupName(queue),
			semconv.MessagingOperationName("process"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingMessageBodySize(len(m.Data)),
		))
}

// endWithError ends span, marked failed by err's status code when err is
// not nil.
func endWithError(span trace.Span, err error) {
	if err != nil {
		code := 0
		var s apierrors.APIStatus
		if errors.As(err, &s) {
			code = int(s.Status().Code)
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(code)))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
