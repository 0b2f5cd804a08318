package tracing

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols of the OTLP exporter.
const (
	ProtocolGRPC         = "grpc"
	ProtocolHTTPProtobuf = "http/protobuf"
)

// The OpenTelemetry environment variables a Config honours, besides the
// exporter's own (headers, certificates, timeouts, compression), which
// the exporter reads itself.
const (
	EnvEndpoint        = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint  = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol        = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol  = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	EnvSampler         = "OTEL_TRACES_SAMPLER"
	EnvSamplerArg      = "OTEL_TRACES_SAMPLER_ARG"
	EnvSDKDisabled     = "OTEL_SDK_DISABLED"
	EnvServiceName     = "OTEL_SERVICE_NAME"
	EnvResourceAttribs = "OTEL_RESOURCE_ATTRIBUTES"
)

// tracesPath is where an OTLP/HTTP receiver takes traces, appended to a
// base endpoint as the specification says.
const tracesPath = "/v1/traces"

// unset marks --tracing-sampling-rate-per-million not given, so that
// OTEL_TRACES_SAMPLER may decide.
const unset = -1

// Options are the tracing flags. Flags win over the environment, as
// kube's flags win over its defaults; what the flags leave unset the
// OTEL_* variables may set.
type Options struct {
	// Endpoint is the OTLP receiver: a URL (http:// is plaintext, https://
	// TLS) or, as kube's TracingConfiguration has it, host:port in
	// plaintext.
	Endpoint string
	// Protocol is grpc or http/protobuf.
	Protocol string
	// SamplingRatePerMillion is how many of a million traces started here
	// are sampled; a trace a caller started keeps the caller's decision.
	SamplingRatePerMillion int32
}

// NewOptions are the defaults: tracing off unless the environment names
// an endpoint.
func NewOptions() Options { return Options{SamplingRatePerMillion: unset} }

// AddFlags binds o to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Endpoint, "tracing-endpoint", o.Endpoint, "OTLP receiver to send traces to: a URL, or host:port in plaintext; empty: "+EnvTracesEndpoint+" or "+EnvEndpoint+", else no tracing")
	fs.StringVar(&o.Protocol, "tracing-protocol", o.Protocol, "OTLP protocol, grpc or http/protobuf; empty: "+EnvTracesProtocol+" or "+EnvProtocol+", else grpc")
	fs.Int32Var(&o.SamplingRatePerMillion, "tracing-sampling-rate-per-million", o.SamplingRatePerMillion, "traces sampled per million that this service starts (a caller's sampled traceparent is always followed); unset: "+EnvSampler+", else all")
}

// Validate reports every problem with o and with the environment it
// reads.
func (o *Options) Validate() []error {
	if _, err := o.resolve(os.Getenv); err != nil {
		return []error{err}
	}
	return nil
}

// Config is o resolved against getenv (os.Getenv in a service).
func (o *Options) Config(getenv func(string) string) (*Config, error) {
	return o.resolve(getenv)
}

// Config is where traces go and which are sampled; an empty Endpoint
// turns tracing off.
type Config struct {
	// Endpoint is the receiver's full URL (for OTLP/HTTP, with the traces
	// path).
	Endpoint string
	Protocol string
	Sampler  sdktrace.Sampler
}

func (o *Options) resolve(getenv func(string) string) (*Config, error) {
	var errs []error
	c := &Config{}
	c.Protocol = first(o.Protocol, getenv(EnvTracesProtocol), getenv(EnvProtocol), ProtocolGRPC)
	if c.Protocol != ProtocolGRPC && c.Protocol != ProtocolHTTPProtobuf {
		errs = append(errs, fmt.Errorf("--tracing-protocol: want %s or %s, got %q", ProtocolGRPC, ProtocolHTTPProtobuf, c.Protocol))
	}
	var err error
	switch {
	case o.Endpoint != "":
		c.Endpoint, err = endpointURL(o.Endpoint, c.Protocol == ProtocolHTTPProtobuf)
		if err != nil {
			err = fmt.Errorf("--tracing-endpoint: %w", err)
		}
	case getenv(EnvTracesEndpoint) != "":
		// The signal's own endpoint is the full URL, used as it is.
		c.Endpoint, err = endpointURL(getenv(EnvTracesEndpoint), false)
		if err != nil {
			err = fmt.Errorf("%s: %w", EnvTracesEndpoint, err)
		}
	case getenv(EnvEndpoint) != "":
		c.Endpoint, err = endpointURL(getenv(EnvEndpoint), c.Protocol == ProtocolHTTPProtobuf)
		if err != nil {
			err = fmt.Errorf("%s: %w", EnvEndpoint, err)
		}
	}
	if err != nil {
		errs = append(errs, err)
	}
	if disabled, _ := strconv.ParseBool(getenv(EnvSDKDisabled)); disabled && o.Endpoint == "" {
		c.Endpoint = ""
	}
	if c.Sampler, err = o.sampler(getenv); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// sampler always follows a sampled parent, so that a trace is never
// broken in the middle; only the traces started here are sampled by
// ratio.
func (o *Options) sampler(getenv func(string) string) (sdktrace.Sampler, error) {
	if o.SamplingRatePerMillion != unset {
		if o.SamplingRatePerMillion < 0 || o.SamplingRatePerMillion > 1_000_000 {
			return nil, fmt.Errorf("--tracing-sampling-rate-per-million: want 0 to 1000000, got %d", o.SamplingRatePerMillion)
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(float64(o.SamplingRatePerMillion) / 1e6)), nil
	}
	ratio := 1.0
	if arg := getenv(EnvSamplerArg); arg != "" {
		var err error
		if ratio, err = strconv.ParseFloat(arg, 64); err != nil || ratio < 0 || ratio > 1 {
			return nil, fmt.Errorf("%s: want a ratio from 0 to 1, got %q", EnvSamplerArg, arg)
		}
	}
	switch name := getenv(EnvSampler); name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio)), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "traceidratio":
		return sdktrace.TraceIDRatioBased(ratio), nil
	default:
		return nil, fmt.Errorf("%s: unsupported sampler %q", EnvSampler, name)
	}
}

// endpointURL is endpoint as a URL with a scheme; a bare host:port is
// plaintext. A base endpoint of OTLP/HTTP without a path gets the traces
// path.
func endpointURL(endpoint string, appendPath bool) (string, error) {
	if !strings.Contains(endpoint, "://") {
		if _, _, err := net.SplitHostPort(endpoint); err != nil {
			return "", fmt.Errorf("want a URL or host:port, got %q", endpoint)
		}
		endpoint = "http://" + endpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an http or https URL, got %q", endpoint)
	}
	if appendPath {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
	}
	return u.String(), nil
}

// first is the first of values that is set.
func first(values ...string) string {
	for _, v := range values {
		if v != "" {
			return v
		}
	}
	return ""
}

// Args are the flags that give a service o's settings, for a launcher
// that hands its own to every service it starts.
func (o *Options) Args() []string {
	var args []string
	if o.Endpoint != "" {
		args = append(args, "--tracing-endpoint="+o.Endpoint)
	}
	if o.Protocol != "" {
		args = append(args, "--tracing-protocol="+o.Protocol)
	}
	if o.SamplingRatePerMillion != unset {
		args = append(args, "--tracing-sampling-rate-per-million="+strconv.Itoa(int(o.SamplingRatePerMillion)))
	}
	return args
}
