package filters

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
)

// Filters builds the gateway's filters from one validated Config; the
// filters share its metrics and its Lifecycle.
type Filters struct {
	cfg        Config
	info       InfoFunc
	privileged func(echo.Context) bool
	userName   func(echo.Context) string
	log        *slog.Logger
	clock      clock.Clock
	metrics    *metrics
	lifecycle  *Lifecycle
	// readOnly and mutating hold a token per request in flight; nil when
	// unlimited.
	readOnly, mutating chan struct{}
	// longRunning counts each user's long-running requests; nil when
	// unlimited.
	longRunning *userSlots
}

// Option configures New.
type Option func(*Filters)

// WithRequestInfo sets how the filters read a request's info; the default
// parses the request each time.
func WithRequestInfo(info InfoFunc) Option { return func(f *Filters) { f.info = info } }

// WithPrivileged sets who is served beyond the max-in-flight limits, as
// kube serves system:masters: a super-user or loopback client must always
// get an answer.
func WithPrivileged(privileged func(echo.Context) bool) Option {
	return func(f *Filters) { f.privileged = privileged }
}

// WithUserName sets how the filters name a request's user, for the
// per-user limit of long-running requests; without it that limit is off.
func WithUserName(name func(echo.Context) string) Option {
	return func(f *Filters) { f.userName = name }
}

// WithLogger sets the logger; the default discards.
func WithLogger(log *slog.Logger) Option { return func(f *Filters) { f.log = log } }

// WithClock sets the clock the Lifecycle waits on.
func WithClock(c clock.Clock) Option { return func(f *Filters) { f.clock = c } }

// New builds the filters from cfg and registers their metrics on reg.
func New(cfg Config, reg prometheus.Registerer, opts ...Option) (*Filters, error) {
	if errs := cfg.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("filters config: %w", errors.Join(errs...))
	}
	f := &Filters{
		cfg:   cfg,
		info:  ParseInfo,
		log:   slog.New(slog.DiscardHandler),
		clock: clock.RealClock{},
	}
	for _, o := range opts {
		o(f)
	}
	if cfg.MaxRequestsInFlight > 0 {
		f.readOnly = make(chan struct{}, cfg.MaxRequestsInFlight)
	}
	if cfg.MaxMutatingRequestsInFlight > 0 {
		f.mutating = make(chan struct{}, cfg.MaxMutatingRequestsInFlight)
	}
	if cfg.MaxLongRunningRequestsPerUser > 0 {
		f.longRunning = &userSlots{limit: cfg.MaxLongRunningRequestsPerUser, open: map[string]int{}}
	}
	m, err := newMetrics(reg, f.readOnly, f.mutating)
	if err != nil {
		return nil, err
	}
	f.metrics = m
	f.lifecycle = newLifecycle(cfg.ShutdownDelay, cfg.ShutdownTimeout, f.clock)
	return f, nil
}

// Lifecycle is the shutdown state the filters and health checks share.
func (f *Filters) Lifecycle() *Lifecycle { return f.lifecycle }
