package server

import (
	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"kplane.dev/libs/apiserver/frontproxy"
)

// traceRequest says on the request's server span which resource the
// request acts on and, once authentication has said, who made it. The
// HTTP server's tracing handler started the span, named after the
// operation (requestinfo.SpanName) rather than the URL, whose names would
// make every span name unique, and sets the response code when the
// response is written.
func traceRequest(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		span := trace.SpanFromContext(c.Request().Context())
		if !span.IsRecording() {
			return next(c)
		}
		info := requestInfo(c)
		attrs := []attribute.KeyValue{attribute.String("kplane.request.verb", info.Verb)}
		if info.IsResourceRequest {
			resource := info.Resource
			if info.Subresource != "" {
				resource += "/" + info.Subresource
			}
			attrs = append(attrs,
				attribute.String("kplane.request.group", info.APIGroup),
				attribute.String("kplane.request.version", info.APIVersion),
				attribute.String("kplane.request.resource", resource))
			if info.Namespace != "" {
				attrs = append(attrs, semconv.K8SNamespaceName(info.Namespace))
			}
		}
		span.SetAttributes(attrs...)
		err := next(c)
		if u, ok := frontproxy.UserFrom(c.Request().Context()); ok {
			span.SetAttributes(semconv.UserName(u.Name))
		}
		return err
	}
}
