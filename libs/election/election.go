package election

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Term is one replica's leadership.
type Term struct {
	// ID names the leader (its lease, in hex).
	ID string
	// Guard holds in an etcd transaction only while this term lasts: put
	// it in the If of every write the leader alone may make.
	Guard clientv3.Cmp
}

// LeadFunc is the work of a leader. Its ctx ends when the term ends; it
// returns then. An error ends the term: another replica may lead next.
type LeadFunc func(ctx context.Context, t Term) error

type options struct {
	ttl     int
	backoff time.Duration
	logger  *slog.Logger
	metrics *Metrics
	name    string
}

// Option configures Run.
type Option func(*options)

// WithTTL sets, in seconds, how long a leader that died without resigning
// keeps the others waiting (default 15).
func WithTTL(seconds int) Option { return func(o *options) { o.ttl = seconds } }

// WithBackoff sets the wait before campaigning again after a failed term
// (default one second).
func WithBackoff(d time.Duration) Option { return func(o *options) { o.backoff = d } }

// WithLogger logs terms starting and ending.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// revokeTimeout bounds the lease revocation that hands leadership over.
const revokeTimeout = 10 * time.Second

// Run campaigns under prefix and runs lead for every term this replica
// wins, until ctx ends; it then resigns, so another replica takes over at
// once, and returns nil.
func Run(ctx context.Context, client *clientv3.Client, prefix string, lead LeadFunc, opts ...Option) error {
	o := options{ttl: 15, backoff: time.Second, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	o.campaigning()
	for ctx.Err() == nil {
		if err := term(ctx, client, prefix, lead, o); err != nil && ctx.Err() == nil {
			o.logger.Warn("leadership ended", "election", prefix, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(o.backoff):
			}
		}
	}
	return nil
}

func term(ctx context.Context, client *clientv3.Client, prefix string, lead LeadFunc, o options) error {
	session, err := concurrency.NewSession(client, concurrency.WithTTL(o.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("open election session: %w", err)
	}
	defer func() {
		// Revoking the lease ends the term at once; ctx may be done
		// already, hence a context of its own.
		session.Orphan()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), revokeTimeout)
		defer cancel()
		if _, err := client.Revoke(rctx, session.Lease()); err != nil {
			o.logger.Warn("revoke election lease", "election", prefix, "err", err)
		}
	}()
	id := strconv.FormatInt(int64(session.Lease()), 16)
	e := concurrency.NewElection(session, prefix)
	if err := e.Campaign(ctx, id); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	o.logger.Info("leading", "election", prefix, "leader", id)
	defer o.leading()()

	termCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- lead(termCtx, Term{ID: id, Guard: clientv3.Compare(clientv3.CreateRevision(e.Key()), "=", e.Rev())})
	}()
	select {
	case err := <-done:
		return err
	case <-session.Done():
		cancel()
		<-done
		return errors.New("election lease expired")
	case <-ctx.Done():
		cancel()
		return <-done
	}
}
