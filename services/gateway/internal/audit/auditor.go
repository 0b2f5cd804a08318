package audit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/services/gateway/internal/audit/policy"
)

// Auditor audits requests by a policy to its backends.
type Auditor struct {
	policy      *policy.Evaluator
	buffers     []*buffer
	wait        time.Duration
	info        InfoFunc
	longRunning func(*requestinfo.Info) bool
	log         *slog.Logger
	clock       clock.Clock
	metrics     *metrics

	stop    context.CancelFunc
	workers sync.WaitGroup
}

// Option configures New.
type Option func(*Auditor)

// WithRequestInfo sets how a request's info is read; the default parses
// the request.
func WithRequestInfo(info InfoFunc) Option {
	return func(a *Auditor) { a.info = info }
}

// WithLongRunning sets which requests are long-running: they get a
// ResponseStarted event when their response starts, as in kube. The
// default is none.
func WithLongRunning(f func(*requestinfo.Info) bool) Option {
	return func(a *Auditor) { a.longRunning = f }
}

// WithEnqueueWait bounds how long a request waits for room in a full
// buffer before its event is dropped; the default, 0, drops at once, as
// kube's batch mode does.
func WithEnqueueWait(d time.Duration) Option { return func(a *Auditor) { a.wait = d } }

// WithLogger sets the logger; the default discards.
func WithLogger(log *slog.Logger) Option { return func(a *Auditor) { a.log = log } }

// WithClock sets the clock of the timestamps, batches and waits.
func WithClock(c clock.Clock) Option { return func(a *Auditor) { a.clock = c } }

// New starts an auditor deciding by p and sending to backends; its
// metrics go on reg. Close stops it.
func New(p *policy.Evaluator, backends []Backend, reg prometheus.Registerer, opts ...Option) (*Auditor, error) {
	if p == nil {
		return nil, errors.New("audit: a policy is required")
	}
	a := &Auditor{
		policy: p,
		info: func(c echo.Context) *requestinfo.Info {
			return requestinfo.Parse(c.Request().Method, c.Request().URL)
		},
		longRunning: func(*requestinfo.Info) bool { return false },
		log:         slog.New(slog.DiscardHandler),
		clock:       clock.RealClock{},
	}
	for _, o := range opts {
		o(a)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	a.metrics = m
	for _, b := range backends {
		if b.Sink == nil || b.BufferSize <= 0 || b.MaxBatchSize <= 0 || b.MaxBatchWait < 0 {
			return nil, fmt.Errorf("audit backend %q: a sink, a positive buffer size and batch size and a batch wait of 0 or more are required", b.Name)
		}
		failed := m.errors.WithLabelValues(b.Name)
		a.buffers = append(a.buffers, newBuffer(b, a.clock, func(n int) { failed.Add(float64(n)) }))
	}
	ctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	for _, b := range a.buffers {
		a.workers.Go(func() { b.run(ctx) })
	}
	return a, nil
}

// Close stops taking events and waits, until ctx ends, for the backends
// to send what they hold; what they could not send is counted as failed.
func (a *Auditor) Close(ctx context.Context) error {
	for _, b := range a.buffers {
		b.close()
	}
	done := make(chan struct{})
	go func() {
		a.workers.Wait()
		close(done)
	}()
	select {
	case <-done:
		a.stop()
		return nil
	case <-ctx.Done():
		// The sinks give up on what they are sending.
		a.stop()
		<-done
		return fmt.Errorf("audit backends did not send every event before shutdown: %w", ctx.Err())
	}
}

// send hands one encoded event to every backend, counting the ones that
// had no room for it.
func (a *Auditor) send(ev Encoded) {
	a.metrics.events.Inc()
	for _, b := range a.buffers {
		if !b.enqueue(ev, a.wait) {
			a.metrics.errors.WithLabelValues(b.Name).Inc()
		}
	}
}

// InfoFunc returns the request info of c's request.
type InfoFunc func(c echo.Context) *requestinfo.Info
