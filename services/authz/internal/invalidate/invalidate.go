package invalidate

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/utils/clock"

	"kplane.dev/proto/authz"
)

// MinInterval is the least time between two publishes.
const MinInterval = 100 * time.Millisecond

// Publisher coalesces changes into invalidations. Changed may be called
// from any goroutine; Run publishes.
type Publisher struct {
	nc    *nats.Conn
	clock clock.Clock
	log   *slog.Logger

	// pending is signalled, without blocking, when reason is set.
	pending chan struct{}
	mu      sync.Mutex
	reason  string
	changes int
}

// Option changes a Publisher.
type Option func(*Publisher)

// WithClock sets the clock that spaces publishes.
func WithClock(c clock.Clock) Option { return func(p *Publisher) { p.clock = c } }

// WithLogger sets where failed publishes are logged.
func WithLogger(l *slog.Logger) Option { return func(p *Publisher) { p.log = l } }

// New returns a Publisher on nc.
func New(nc *nats.Conn, opts ...Option) *Publisher {
	p := &Publisher{nc: nc, clock: clock.RealClock{}, log: slog.New(slog.DiscardHandler), pending: make(chan struct{}, 1)}
	for _, o := range opts {
		o(p)
	}
	return p
}

// Changed records a change, reason naming it for logs
// ("clusterrolebindings/admins"); the next publish carries the latest.
func (p *Publisher) Changed(reason string) {
	p.mu.Lock()
	p.reason = reason
	p.changes++
	p.mu.Unlock()
	select {
	case p.pending <- struct{}{}:
	default:
	}
}

// Run publishes until ctx ends.
func (p *Publisher) Run(ctx context.Context) error {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.pending:
		}
		if wait := MinInterval - p.clock.Since(last); !last.IsZero() && wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-p.clock.After(wait):
			}
		}
		// Changes signalled while waiting are covered by this publish.
		select {
		case <-p.pending:
		default:
		}
		p.mu.Lock()
		inv := authz.Invalidation{Reason: p.reason}
		changes := p.changes
		p.changes = 0
		p.mu.Unlock()
		last = p.clock.Now()
		data, err := json.Marshal(inv)
		if err != nil {
			p.log.Error("encode invalidation", "err", err)
			continue
		}
		if err := p.nc.Publish(authz.SubjectInvalidate, data); err != nil {
			p.log.Warn("publish invalidation", "reason", inv.Reason, "err", err)
			continue
		}
		p.log.Debug("published invalidation", "reason", inv.Reason, "changes", changes)
	}
}
