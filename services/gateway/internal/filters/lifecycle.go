package filters

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"k8s.io/utils/clock"

	"kplane.dev/libs/healthz"
)

// Lifecycle is the gateway's shutdown state: readiness fails once
// shutdown begins, and long-running requests end when told to, since a
// watch never finishes by itself and would hold the server's shutdown to
// its timeout.
type Lifecycle struct {
	delay, timeout time.Duration
	clock          clock.Clock
	draining       atomic.Bool
	// longRunning ends when long-running requests must end.
	longRunning    context.Context
	endLongRunning context.CancelFunc
}

func newLifecycle(delay, timeout time.Duration, c clock.Clock) *Lifecycle {
	l := &Lifecycle{delay: delay, timeout: timeout, clock: c}
	l.longRunning, l.endLongRunning = context.WithCancel(context.Background())
	return l
}

// BeginShutdown makes the shutdown check fail from now on.
func (l *Lifecycle) BeginShutdown() { l.draining.Store(true) }

// Draining reports whether shutdown has begun.
func (l *Lifecycle) Draining() bool { return l.draining.Load() }

// EndLongRunning ends every long-running request, and any that starts
// later, by cancelling its context.
func (l *Lifecycle) EndLongRunning() { l.endLongRunning() }

// ShutdownCheck is kube's "shutdown" readiness check: it fails once
// shutdown has begun, so that load balancers stop sending requests.
func (l *Lifecycle) ShutdownCheck() healthz.Checker {
	return healthz.NamedCheck("shutdown", func(*http.Request) error {
		if l.Draining() {
			return errors.New("process is shutting down")
		}
		return nil
	})
}

// Drain shuts srv down in kube's order: readiness fails, serving goes on
// for the shutdown delay, long-running requests end, then srv stops
// accepting and waits up to the shutdown timeout for the requests in
// flight. It ignores ctx's end, which is usually what started it.
func (l *Lifecycle) Drain(ctx context.Context, srv *http.Server) error {
	ctx = context.WithoutCancel(ctx)
	l.BeginShutdown()
	if l.delay > 0 {
		<-l.clock.After(l.delay)
	}
	l.EndLongRunning()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("wait for requests in flight: %w", err)
	}
	return nil
}

// EndLongRunningOnShutdown gives each long-running request a context that
// also ends at Lifecycle.EndLongRunning.
func (f *Filters) EndLongRunningOnShutdown() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if !LongRunning(f.info(c)) {
				return next(c)
			}
			r := c.Request()
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(f.lifecycle.longRunning, cancel)()
			c.SetRequest(r.WithContext(ctx))
			return next(c)
		}
	}
}
