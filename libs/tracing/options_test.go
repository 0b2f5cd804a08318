package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"kplane.dev/libs/tracing"
)

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		endpoint string
		protocol string
		sampler  string
		err      string
	}{
		{name: "nothing configured is off", sampler: "ParentBased{root:AlwaysOnSampler"},
		{
			name:     "kube's host:port is plaintext gRPC",
			args:     []string{"--tracing-endpoint=collector:4317", "--tracing-sampling-rate-per-million=250000"},
			endpoint: "http://collector:4317", protocol: "grpc", sampler: "ParentBased{root:TraceIDRatioBased{0.25}",
		},
		{
			name:     "a base URL of OTLP/HTTP gets the traces path",
			args:     []string{"--tracing-endpoint=https://collector:4318", "--tracing-protocol=http/protobuf"},
			endpoint: "https://collector:4318/v1/traces", protocol: "http/protobuf",
		},
		{
			name:     "the environment's base endpoint and protocol",
			env:      map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"},
			endpoint: "http://env:4318/otlp/v1/traces", protocol: "http/protobuf",
		},
		{
			name:     "the traces endpoint is used as it is and beats the base one",
			env:      map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4318/custom", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"},
			endpoint: "http://traces:4318/custom", protocol: "http/protobuf",
		},
		{
			name:     "flags beat the environment",
			args:     []string{"--tracing-endpoint=flag:4317", "--tracing-protocol=grpc", "--tracing-sampling-rate-per-million=0"},
			env:      map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_TRACES_SAMPLER": "always_on"},
			endpoint: "http://flag:4317", protocol: "grpc", sampler: "ParentBased{root:TraceIDRatioBased{0}",
		},
		{
			name:     "the environment's sampler",
			env:      map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"},
			endpoint: "http://env:4317", protocol: "grpc", sampler: "ParentBased{root:TraceIDRatioBased{0.1}",
		},
		{
			name: "OTEL_SDK_DISABLED turns the environment's endpoint off",
			env:  map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4317", "OTEL_SDK_DISABLED": "true"},
		},
		{name: "an unknown protocol", args: []string{"--tracing-protocol=http/json"}, err: "--tracing-protocol"},
		{name: "a rate above a million", args: []string{"--tracing-sampling-rate-per-million=1000001"}, err: "--tracing-sampling-rate-per-million"},
		{name: "not an endpoint", args: []string{"--tracing-endpoint=collector"}, err: "--tracing-endpoint"},
		{name: "an unsupported sampler", env: map[string]string{"OTEL_TRACES_SAMPLER": "jaeger_remote"}, err: "OTEL_TRACES_SAMPLER"},
		{name: "a ratio above one", env: map[string]string{"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, err: "OTEL_TRACES_SAMPLER_ARG"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tracing.NewOptions()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			c, err := o.Config(func(k string) string { return tc.env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tc.endpoint {
				t.Errorf("endpoint %q, want %q", c.Endpoint, tc.endpoint)
			}
			if tc.protocol != "" && c.Protocol != tc.protocol {
				t.Errorf("protocol %q, want %q", c.Protocol, tc.protocol)
			}
			if tc.sampler != "" && !strings.HasPrefix(c.Sampler.Description(), tc.sampler) {
				t.Errorf("sampler %s, want %s...", c.Sampler.Description(), tc.sampler)
			}
		})
	}
}

// TestOffWithoutEndpoint: without an endpoint there is no Provider, and
// what it would wrap is handed back as it is, so that tracing turned off
// costs nothing.
func TestOffWithoutEndpoint(t *testing.T) {
	o := tracing.NewOptions()
	c, err := o.Config(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	p, err := tracing.New(context.Background(), c, tracing.Resource{Name: "kplane-test"})
	if err != nil || p != nil || p.Enabled() {
		t.Fatalf("New without an endpoint = %v, %v; want nil", p, err)
	}
	h := http.NotFoundHandler()
	if got := p.Handler(h, "op"); fmt.Sprintf("%T", got) != fmt.Sprintf("%T", h) {
		t.Fatal("a nil Provider wrapped the handler")
	}
	rt := http.DefaultTransport
	if p.Transport(rt) != rt {
		t.Fatal("a nil Provider wrapped the transport")
	}
	ctx := context.Background()
	if got, span := p.Start(ctx, "scope", "op"); got != ctx || span.SpanContext().IsValid() {
		t.Fatal("a nil Provider started a span")
	}
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
