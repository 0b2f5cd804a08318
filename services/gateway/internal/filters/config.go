package filters

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"kplane.dev/libs/command"
)

// kube-apiserver's defaults.
const (
	DefaultMaxRequestsInFlight         = 400
	DefaultMaxMutatingRequestsInFlight = 200
	DefaultRequestTimeout              = 60 * time.Second
	// DefaultMaxRequestBodyBytes is kube's limit on the body of a write.
	DefaultMaxRequestBodyBytes = 3 << 20
	// DefaultMaxLongRunningRequestsPerUser bounds one user's open watches
	// and other long-running requests: far more than a controller opens,
	// far fewer than would starve everyone else.
	DefaultMaxLongRunningRequestsPerUser = 500
	// DefaultShutdownTimeout bounds the wait for requests in flight at
	// shutdown, as kube's server config does.
	DefaultShutdownTimeout = 60 * time.Second
	// MaxHeaderBytes is kube's limit on a request's headers; the server
	// sets it as http.Server.MaxHeaderBytes.
	MaxHeaderBytes = 1 << 20
)

// Config is what the filters and the Lifecycle need. Flags carry kube's
// names so that operators' habits carry over.
type Config struct {
	// MaxRequestsInFlight limits read-only requests (get, list) served at
	// once; 0 means no limit.
	MaxRequestsInFlight int
	// MaxMutatingRequestsInFlight limits the other requests; 0 means no
	// limit.
	MaxMutatingRequestsInFlight int
	// RequestTimeout is the longest a request that is not long-running
	// may take, and the cap on its ?timeout=.
	RequestTimeout time.Duration
	// MaxRequestBodyBytes limits the body of every request but the
	// long-running ones; 0 means no limit.
	MaxRequestBodyBytes int64
	// MaxLongRunningRequestsPerUser limits the watches and other
	// long-running requests one user has open at once; 0 means no limit.
	MaxLongRunningRequestsPerUser int
	// ShutdownDelay is how long the server keeps serving, with readiness
	// failing, before it stops accepting requests, so that load balancers
	// see it unready first.
	ShutdownDelay time.Duration
	// ShutdownTimeout bounds the wait for requests in flight.
	ShutdownTimeout time.Duration
	// AccessLogLevel is the level of the line logged per request (debug,
	// info, warn or error): below --log-level, the access log is off.
	AccessLogLevel string
}

// DefaultConfig is kube-apiserver's configuration.
func DefaultConfig() Config {
	return Config{
		MaxRequestsInFlight:           DefaultMaxRequestsInFlight,
		MaxMutatingRequestsInFlight:   DefaultMaxMutatingRequestsInFlight,
		RequestTimeout:                DefaultRequestTimeout,
		MaxRequestBodyBytes:           DefaultMaxRequestBodyBytes,
		MaxLongRunningRequestsPerUser: DefaultMaxLongRunningRequestsPerUser,
		ShutdownTimeout:               DefaultShutdownTimeout,
		AccessLogLevel:                command.DefaultLogLevel,
	}
}

// AddFlags registers c's flags on fs, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.IntVar(&c.MaxRequestsInFlight, "max-requests-inflight", c.MaxRequestsInFlight,
		"the maximum number of read-only requests in flight at a given time; 0 means no limit")
	fs.IntVar(&c.MaxMutatingRequestsInFlight, "max-mutating-requests-inflight", c.MaxMutatingRequestsInFlight,
		"the maximum number of mutating requests in flight at a given time; 0 means no limit")
	fs.DurationVar(&c.RequestTimeout, "request-timeout", c.RequestTimeout,
		"the longest a request may take before it times out, except watches and other long-running requests; also the cap on ?timeout=")
	fs.Int64Var(&c.MaxRequestBodyBytes, "max-resource-write-bytes", c.MaxRequestBodyBytes,
		"the limit on the body of a request (the bodies of GET and HEAD are never read; exec, attach, port-forward and proxy stream unlimited); 0 means no limit")
	fs.IntVar(&c.MaxLongRunningRequestsPerUser, "max-long-running-requests-per-user", c.MaxLongRunningRequestsPerUser,
		"the maximum number of watches and other long-running requests one user may have open at once, beyond which kube's 429 answers; system:masters is not limited; 0 means no limit")
	fs.DurationVar(&c.ShutdownDelay, "shutdown-delay-duration", c.ShutdownDelay,
		"how long to keep serving, with /readyz failing, after a shutdown signal")
	fs.StringVar(&c.AccessLogLevel, "access-log-level", c.AccessLogLevel,
		"level of the line logged for every request (debug, info, warn or error); a level below --log-level turns the access log off")
}

// Validate reports every invalid field.
func (c *Config) Validate() []error {
	var errs []error
	if c.MaxRequestsInFlight < 0 {
		errs = append(errs, fmt.Errorf("--max-requests-inflight must not be negative, got %d", c.MaxRequestsInFlight))
	}
	if c.MaxMutatingRequestsInFlight < 0 {
		errs = append(errs, fmt.Errorf("--max-mutating-requests-inflight must not be negative, got %d", c.MaxMutatingRequestsInFlight))
	}
	if c.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout must be positive, got %s", c.RequestTimeout))
	}
	if c.MaxRequestBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-resource-write-bytes must not be negative, got %d", c.MaxRequestBodyBytes))
	}
	if c.MaxLongRunningRequestsPerUser < 0 {
		errs = append(errs, fmt.Errorf("--max-long-running-requests-per-user must not be negative, got %d", c.MaxLongRunningRequestsPerUser))
	}
	if c.ShutdownDelay < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-delay-duration must not be negative, got %s", c.ShutdownDelay))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout must be positive, got %s", c.ShutdownTimeout))
	}
	if _, err := command.ParseLogLevel(c.AccessLogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--access-log-level: %w", err))
	}
	return errs
}
