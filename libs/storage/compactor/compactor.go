package compactor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Defaults.
const (
	DefaultInterval = 5 * time.Minute
	// DefaultPrefix holds the election and the record of the last
	// compaction.
	DefaultPrefix = "/kplane/compactor"
	// defaultTTL is how long a replica that died keeps the others from
	// taking over, in seconds.
	defaultTTL = 15
	// callTimeout bounds each etcd call of a compaction round.
	callTimeout = 30 * time.Second
)

// Compactor compacts etcd while it leads the election.
type Compactor struct {
	client *clientv3.Client
	opts   options
}

type options struct {
	interval time.Duration
	prefix   string
	ttl      int
	logger   *slog.Logger
}

// Option configures a Compactor.
type Option func(*options)

// WithInterval sets how often the leader compacts (default five minutes).
func WithInterval(d time.Duration) Option { return func(o *options) { o.interval = d } }

// WithPrefix sets the etcd prefix of the election and of the record of the
// last compaction (default DefaultPrefix). Replicas that share a prefix take
// turns; they must share it to compact one at a time.
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithSessionTTL sets, in seconds, how long the leader's lease outlives it
// when it dies without resigning (default 15).
func WithSessionTTL(seconds int) Option { return func(o *options) { o.ttl = seconds } }

// WithLogger logs leadership changes and compactions. Without it the
// compactor logs nothing.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// New returns a compactor of the etcd that client reaches.
func New(client *clientv3.Client, opts ...Option) *Compactor {
	o := options{interval: DefaultInterval, prefix: DefaultPrefix, ttl: defaultTTL, logger: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return &Compactor{client: client, opts: o}
}

// Record is what the leader writes at RecordKey before each compaction.
type Record struct {
	// Revision is the revision compacted to.
	Revision int64 `json:"revision"`
	// Leader is the hex lease ID of the leader that compacted.
	Leader string `json:"leader"`
}

// RecordKey is the key that holds the Record of the last compaction below
// prefix.
func RecordKey(prefix string) string { return prefix + "/last" }

func (c *Compactor) electionPrefix() string { return c.opts.prefix + "/election" }

// Run campaigns for leadership and compacts while it leads, until ctx ends;
// it then resigns, so another replica takes over at once, and returns nil.
// When etcd fails it or its lease expires, it waits an interval and
// campaigns again.
func (c *Compactor) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		if err := c.lead(ctx); err != nil && ctx.Err() == nil {
			c.opts.logger.Warn("compactor lost leadership", "err", err)
			// Back off before campaigning again, so an unreachable etcd
			// is not hammered.
			select {
			case <-ctx.Done():
			case <-time.After(c.opts.interval):
			}
		}
	}
	return nil
}

// lead runs one session: campaign, then compact every interval until ctx
// ends or the session's lease is lost.
func (c *Compactor) lead(ctx context.Context) error {
	session, err := concurrency.NewSession(c.client, concurrency.WithTTL(c.opts.ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("open election session: %w", err)
	}
	defer func() {
		// Revoking the lease ends the leadership at once, so another
		// replica takes over without waiting for the TTL; ctx may be done
		// already, hence a context of its own.
		session.Orphan()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if _, err := c.client.Revoke(rctx, session.Lease()); err != nil {
			c.opts.logger.Warn("revoke compactor lease", "err", err)
		}
	}()
	id := strconv.FormatInt(int64(session.Lease()), 16)
	election := concurrency.NewElection(session, c.electionPrefix())
	if err := election.Campaign(ctx, id); err != nil {
		return fmt.Errorf("campaign for compaction: %w", err)
	}
	c.opts.logger.Info("compactor leads", "leader", id)

	ticker := time.NewTicker(c.opts.interval)
	defer ticker.Stop()
	// The revision seen one tick ago; a new leader compacts nothing before
	// it has watched for an interval, as the previous one might just have.
	var prev int64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-session.Done():
			return errors.New("election session expired")
		case <-ticker.C:
		}
		cur, err := c.round(ctx, election, id, prev)
		if err != nil {
			return err
		}
		prev = cur
	}
}

// round compacts to rev (when not 0) if this replica still leads, and
// returns the current revision to compact to next time.
func (c *Compactor) round(ctx context.Context, election *concurrency.Election, id string, rev int64) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	leads := clientv3.Compare(clientv3.CreateRevision(election.Key()), "=", election.Rev())
	if rev == 0 {
		resp, err := c.client.Get(ctx, RecordKey(c.opts.prefix), clientv3.WithCountOnly())
		if err != nil {
			return 0, fmt.Errorf("read current revision: %w", err)
		}
		return resp.Header.Revision, nil
	}
	record, err := json.Marshal(Record{Revision: rev, Leader: id})
	if err != nil {
		return 0, fmt.Errorf("encode compaction record: %w", err)
	}
	// Recording the compaction only while leading makes two replicas'
	// rounds exclude each other even across a change of leader.
	resp, err := c.client.Txn(ctx).If(leads).Then(clientv3.OpPut(RecordKey(c.opts.prefix), string(record))).Commit()
	if err != nil {
		return 0, fmt.Errorf("record compaction to %d: %w", rev, err)
	}
	if !resp.Succeeded {
		return 0, errors.New("no longer the compaction leader")
	}
	if _, err := c.client.Compact(ctx, rev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return 0, fmt.Errorf("compact to %d: %w", rev, err)
	}
	c.opts.logger.Info("compacted etcd", "revision", rev)
	// The record's own write is the newest revision.
	return resp.Header.Revision, nil
}
