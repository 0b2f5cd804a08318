package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/storage"
	"kplane.dev/libs/tracing"
	proto "kplane.dev/proto/changefeed"
)

// Defaults.
const (
	DefaultMaxAge   = 24 * time.Hour
	DefaultMaxBytes = 1 << 30
	// defaultPageSize bounds one etcd read of a snapshot.
	defaultPageSize = 500
	// maxInFlight bounds the publishes awaiting their acknowledgement.
	maxInFlight = 1000
	// defaultLinger is WithLinger's default.
	defaultLinger = 2 * time.Millisecond
	// callTimeout bounds each call to JetStream and each wait for
	// acknowledgements.
	callTimeout = 30 * time.Second
)

// Publisher publishes the changes under one etcd registry prefix.
type Publisher struct {
	etcd     *clientv3.Client
	js       jetstream.JetStream
	keys     func(group, resource string) storage.Keys
	registry string // <prefix>/registry/
	o        options
}

type options struct {
	stream, subjectRoot string
	maxAge              time.Duration
	maxBytes            int64
	replicas            int
	kinds               map[schema.GroupResource]schema.GroupVersionKind
	// others publishes the resources kinds does not name as if there
	// were no kinds.
	others     bool
	pageSize   int64
	retry      time.Duration
	linger     time.Duration
	logger     *slog.Logger
	secretData bool
	tracing    *tracing.Provider
	metrics    *Metrics
}

// Option configures a Publisher.
type Option func(*options)

// WithStream publishes to stream name, on subjects below subjectRoot
// (default proto StreamName and SubjectRoot). Two publishers must not share
// a stream: each resumes from the stream's last message.
func WithStream(name, subjectRoot string) Option {
	return func(o *options) { o.stream, o.subjectRoot = name, subjectRoot }
}

// WithMaxAge sets how long the stream keeps a message (default one day).
// It and the other limits apply when the publisher creates the stream; an
// existing stream is kept as it is.
func WithMaxAge(d time.Duration) Option { return func(o *options) { o.maxAge = d } }

// WithMaxBytes sets how large the stream may grow before it drops its
// oldest messages (default 1 GiB).
func WithMaxBytes(n int64) Option { return func(o *options) { o.maxBytes = n } }

// WithReplicas sets the stream's replicas in a NATS cluster (default 1).
func WithReplicas(n int) Option { return func(o *options) { o.replicas = n } }

// WithKinds publishes only the resources named in kinds, under the
// version and kind given there. Without it every key under the prefix is
// published, under the version and kind of the stored object's apiVersion
// and kind.
func WithKinds(kinds map[schema.GroupResource]schema.GroupVersionKind) Option {
	return func(o *options) { o.kinds = kinds }
}

// WithOtherResources publishes, besides the resources WithKinds names,
// every other resource under the prefix under the apiVersion and kind of
// its stored object, as without WithKinds: custom resources, which come
// and go with their CRDs, stored in their CRD's storage version.
func WithOtherResources() Option { return func(o *options) { o.others = true } }

// WithPageSize sets how many objects one etcd read of a snapshot returns
// (default 500).
func WithPageSize(n int64) Option { return func(o *options) { o.pageSize = n } }

// WithRetryInterval sets the wait before starting again after an error
// (default one second).
func WithRetryInterval(d time.Duration) Option { return func(o *options) { o.retry = d } }

// WithSecretData publishes Secrets whole. Without it a Secret's event
// carries the object without data and stringData (its metadata and type
// only), so that reading the stream does not give away every Secret's
// contents: with it, anyone allowed to read the stream reads them all.
func WithSecretData() Option { return func(o *options) { o.secretData = true } }

// WithLinger sets how long the publisher waits, after a change, for
// more changes to publish with it (default 2ms): the feed's latency is
// traded for fewer writes and acknowledgements under load. Zero
// publishes each change as soon as it is read.
func WithLinger(d time.Duration) Option { return func(o *options) { o.linger = d } }

// WithLogger logs errors, resyncs and where publishing resumes.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTracing starts a trace for each message published, carried in its
// headers, which a subscriber's spans continue (Traced). A change comes
// from etcd's watch, not from the write that made it, so its trace
// begins at the publisher.
func WithTracing(tp *tracing.Provider) Option { return func(o *options) { o.tracing = tp } }

// NewPublisher returns a publisher of the changes under
// <prefix>/registry/ in etcd to JetStream.
func NewPublisher(etcd *clientv3.Client, js jetstream.JetStream, prefix string, opts ...Option) *Publisher {
	o := options{
		stream: proto.StreamName, subjectRoot: proto.SubjectRoot,
		maxAge: DefaultMaxAge, maxBytes: DefaultMaxBytes, replicas: 1,
		pageSize: defaultPageSize, retry: time.Second, linger: defaultLinger,
		logger: slog.New(slog.DiscardHandler),
	}
	for _, opt := range opts {
		opt(&o)
	}
	return &Publisher{
		etcd:     etcd,
		js:       js,
		keys:     func(group, resource string) storage.Keys { return storage.NewKeys(prefix, group, resource) },
		registry: strings.TrimSuffix(prefix, "/") + "/registry/",
		o:        o,
	}
}

// Run publishes until ctx ends, then returns nil. Run it on one replica
// at a time (under kplane.dev/libs/election); an error in the middle
// starts it over from the stream's last message after the retry interval.
func (p *Publisher) Run(ctx context.Context) error {
	for {
		err := p.publish(ctx)
		if ctx.Err() != nil {
			return nil
		}
		p.o.logger.Warn("change feed interrupted", "stream", p.o.stream, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.o.retry):
		}
	}
}

// position is where the stream ends, as its last message says.
type position struct {
	// rev is the revision of the last message; 0 if the stream has none.
	rev int64
	// snapshot: the last message is a resync marker or a snapshot
	// object, and key the key of that object ("" for the marker).
	snapshot bool
	key      string
	// part of parts: the last message is the part-th published change of
	// the parts of revision rev.
	part, parts int
}

// errResync says the publisher cannot continue from the stream's end.
type errResync struct{ reason string }

func (e errResync) Error() string { return "resync needed: " + e.reason }

// publish publishes from where the stream ends until ctx ends or an error.
func (p *Publisher) publish(ctx context.Context) error {
	stream, err := p.ensureStream(ctx)
	if err != nil {
		return err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return fmt.Errorf("read stream %s: %w", p.o.stream, err)
	}
	out := &sink{js: p.js, seq: info.State.LastSeq, tracing: p.o.tracing}
	pos, err := p.position(ctx, stream, info.State.LastSeq)
	if err != nil {
		return err
	}
	p.o.logger.Info("change feed resuming", "stream", p.o.stream, "revision", pos.rev, "snapshot", pos.snapshot)
	for {
		err := p.follow(ctx, out, pos)
		var resync errResync
		if !errors.As(err, &resync) {
			return err
		}
		p.o.logger.Warn("change feed resync", "stream", p.o.stream, "reason", resync.reason)
		if pos, err = p.resync(ctx, out); err != nil {
			return err
		}
	}
}

// ensureStream creates the stream, or opens it as it is. A publisher may
// create its stream but not change it: credentials that could update it
// could point it at other subjects (token reviews, say) and read what it
// stored there. An operator changes an existing stream's limits.
func (p *Publisher) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	want := jetstream.StreamConfig{
		Name:        p.o.stream,
		Description: "kplane change feed: every committed change, in commit order (see kplane.dev/proto/changefeed)",
		Subjects:    []string{p.o.subjectRoot + ".>"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      p.o.maxAge,
		MaxBytes:    p.o.maxBytes,
		Replicas:    p.o.replicas,
		Storage:     jetstream.FileStorage,
		AllowDirect: true,
	}
	stream, err := p.js.Stream(ctx, p.o.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if stream, err = p.js.CreateStream(ctx, want); err != nil {
			return nil, fmt.Errorf("create stream %s: %w", p.o.stream, err)
		}
		return stream, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open stream %s: %w", p.o.stream, err)
	}
	have := stream.CachedInfo().Config
	if !slices.Equal(have.Subjects, want.Subjects) || have.MaxAge != want.MaxAge || have.MaxBytes != want.MaxBytes || have.Replicas != want.Replicas {
		p.o.logger.Warn("change feed stream kept as it is, unlike the publisher's settings",
			"stream", p.o.stream, "subjects", have.Subjects, "maxAge", have.MaxAge, "maxBytes", have.MaxBytes, "replicas", have.Replicas,
			"wantSubjects", want.Subjects, "wantMaxAge", want.MaxAge, "wantMaxBytes", want.MaxBytes, "wantReplicas", want.Replicas)
	}
	return stream, nil
}

// position reads the stream's last message, sequence last.
func (p *Publisher) position(ctx context.Context, stream jetstream.Stream, last uint64) (position, error) {
	if last == 0 {
		return position{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	msg, err := stream.GetMsg(ctx, last)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Limits dropped every message: nothing says where to go on.
		return position{}, nil
	}
	if err != nil {
		return position{}, fmt.Errorf("read last message %d of stream %s: %w", last, p.o.stream, err)
	}
	rev, err := revision(msg.Header)
	if err != nil {
		return position{}, fmt.Errorf("last message %d of stream %s: %w", last, p.o.stream, err)
	}
	if msg.Header.Get(proto.HeaderSnapshot) != "" {
		if msg.Subject == p.o.subjectRoot+".resync" {
			return position{rev: rev, snapshot: true}, nil
		}
		var e proto.Event
		if err := json.Unmarshal(msg.Data, &e); err != nil {
			return position{}, fmt.Errorf("decode last message %d of stream %s: %w", last, p.o.stream, err)
		}
		return position{rev: rev, snapshot: true, key: p.keys(e.Group, e.Resource).Object(e.Namespace, e.Name)}, nil
	}
	var pos position
	if _, err := fmt.Sscanf(msg.Header.Get(proto.HeaderRevisionPart), "%d/%d", &pos.part, &pos.parts); err != nil {
		return position{}, fmt.Errorf("last message %d of stream %s: header %s: %w", last, p.o.stream, proto.HeaderRevisionPart, err)
	}
	pos.rev = rev
	return pos, nil
}

func revision(h nats.Header) (int64, error) {
	rev, err := strconv.ParseInt(h.Get(proto.HeaderRevision), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header %s: %w", proto.HeaderRevision, err)
	}
	return rev, nil
}

// follow publishes from pos on; it returns errResync if it cannot.
func (p *Publisher) follow(ctx context.Context, out *sink, pos position) error {
	switch {
	case pos.snapshot:
		if err := p.snapshot(ctx, out, pos.rev, pos.key); err != nil {
			return err
		}
		return p.watch(ctx, out, pos.rev+1, 0, 0)
	case pos.rev == 0:
		return errResync{reason: "the stream holds no message to resume from"}
	case pos.part >= pos.parts:
		return p.watch(ctx, out, pos.rev+1, 0, 0)
	default:
		return p.watch(ctx, out, pos.rev, pos.rev, pos.part)
	}
}

// resync publishes a resync marker at the current revision and returns
// the position right after it.
func (p *Publisher) resync(ctx context.Context, out *sink) (position, error) {
	rctx, cancel := context.WithTimeout(ctx, callTimeout)
	resp, err := p.etcd.Get(rctx, p.registry, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		return position{}, fmt.Errorf("read current revision: %w", err)
	}
	rev := resp.Header.Revision
	data, err := json.Marshal(proto.Event{Type: proto.Resync, ResourceVersion: strconv.FormatInt(rev, 10)})
	if err != nil {
		return position{}, fmt.Errorf("encode resync marker: %w", err)
	}
	h := nats.Header{}
	h.Set(proto.HeaderMsgID, "r:"+strconv.FormatInt(rev, 10))
	h.Set(proto.HeaderRevision, strconv.FormatInt(rev, 10))
	h.Set(proto.HeaderSnapshot, "true")
	if err := out.publish(ctx, &nats.Msg{Subject: p.o.subjectRoot + ".resync", Header: h, Data: data}); err != nil {
		return position{}, err
	}
	if err := out.flush(ctx); err != nil {
		return position{}, err
	}
	p.o.metrics.resynced()
	return position{rev: rev, snapshot: true}, nil
}

// snapshot publishes every object stored at rev whose key sorts after
// after ("" for all), as ADDED.
func (p *Publisher) snapshot(ctx context.Context, out *sink, rev int64, after string) error {
	end := clientv3.GetPrefixRangeEnd(p.registry)
	from := p.registry
	if after != "" {
		from = after + "\x00"
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := p.etcd.Get(rctx, from, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(p.o.pageSize))
		cancel()
		if errors.Is(err, rpctypes.ErrCompacted) {
			return errResync{reason: fmt.Sprintf("revision %d of the snapshot was compacted", rev)}
		}
		if err != nil {
			return fmt.Errorf("list %s at revision %d: %w", p.registry, rev, err)
		}
		for _, kv := range resp.Kvs {
			m, ok, err := p.change(proto.Added, string(kv.Key), kv.Value, kv.ModRevision)
			if err != nil {
				p.o.logger.Error("change feed skips an object", "err", err)
			}
			if !ok {
				continue
			}
			m.id = "s:" + strconv.FormatInt(rev, 10) + ":" + string(kv.Key)
			m.rev = rev
			if err := out.publishMessage(ctx, m, true, ""); err != nil {
				return err
			}
		}
		if err := out.flush(ctx); err != nil {
			return err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			p.o.metrics.read(rev)
			p.o.metrics.acknowledged(rev)
			return nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// watch publishes the changes from revision from on, leaving out the
// first skip published changes of revision skipRev (published already).
func (p *Publisher) watch(ctx context.Context, out *sink, from, skipRev int64, skip int) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := p.etcd.Watch(wctx, p.registry, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	var (
		batch []clientv3.WatchResponse
		open  bool
	)
	for {
		batch, open = p.gather(ch, batch[:0])
		var last int64
		for _, resp := range batch {
			if resp.CompactRevision != 0 {
				return errResync{reason: fmt.Sprintf("etcd compacted revision %d, the first not yet published is %d", resp.CompactRevision, from)}
			}
			if err := resp.Err(); err != nil {
				return fmt.Errorf("watch %s from revision %d: %w", p.registry, from, err)
			}
			if len(resp.Events) == 0 {
				continue
			}
			last = resp.Events[len(resp.Events)-1].Kv.ModRevision
			p.o.metrics.read(last)
			if err := p.publishEvents(ctx, out, resp.Events, skipRev, skip); err != nil {
				return err
			}
		}
		if last != 0 {
			if err := out.flush(ctx); err != nil {
				return err
			}
			p.o.metrics.acknowledged(last)
		}
		if !open {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("watch %s from revision %d: closed", p.registry, from)
}

// gather appends to batch the next watch response and those that come
// within the linger after it, up to maxInFlight events: their messages
// then go out back to back and their acknowledgements come back
// together, a few writes and wakeups for many changes rather than some
// for each (at a thousand changes a second they were a tenth of core's
// CPU, and as much again in the NATS server; issue 14). open is false
// once the watch has ended.
func (p *Publisher) gather(ch clientv3.WatchChan, batch []clientv3.WatchResponse) (_ []clientv3.WatchResponse, open bool) {
	resp, open := <-ch
	if !open {
		return batch, false
	}
	batch = append(batch, resp)
	if p.o.linger <= 0 {
		return batch, true
	}
	timer := time.NewTimer(p.o.linger)
	defer timer.Stop()
	for n := len(resp.Events); n < maxInFlight; n += len(resp.Events) {
		select {
		case resp, open = <-ch:
			if !open {
				return batch, false
			}
			batch = append(batch, resp)
		case <-timer.C:
			return batch, true
		}
	}
	return batch, true
}

// publishEvents publishes the changes of one watch response, skipping
// the first skip changes of revision skipRev (published before a
// restart).
func (p *Publisher) publishEvents(ctx context.Context, out *sink, events []*clientv3.Event, skipRev int64, skip int) error {
	// A revision's events arrive in one response; its published
	// changes are numbered so a successor can resume inside it.
	for len(events) > 0 {
		rev := events[0].Kv.ModRevision
		n := 1
		for n < len(events) && events[n].Kv.ModRevision == rev {
			n++
		}
		msgs := p.changes(events[:n])
		events = events[n:]
		for i, m := range msgs {
			if rev == skipRev && i < skip {
				continue
			}
			if err := out.publishMessage(ctx, m, false, strconv.Itoa(i+1)+"/"+strconv.Itoa(len(msgs))); err != nil {
				return err
			}
		}
	}
	return nil
}

// changes builds the messages of the events of one revision.
func (p *Publisher) changes(events []*clientv3.Event) []message {
	var msgs []message
	for _, e := range events {
		var (
			m   message
			ok  bool
			err error
		)
		rev := e.Kv.ModRevision
		switch {
		case e.Type == mvccpb.DELETE && e.PrevKv != nil:
			m, ok, err = p.change(proto.Deleted, string(e.Kv.Key), e.PrevKv.Value, rev)
		case e.Type == mvccpb.DELETE:
			m, ok, err = p.change(proto.Deleted, string(e.Kv.Key), nil, rev)
		case e.IsCreate():
			m, ok, err = p.change(proto.Added, string(e.Kv.Key), e.Kv.Value, rev)
		default:
			m, ok, err = p.change(proto.Modified, string(e.Kv.Key), e.Kv.Value, rev)
		}
		if err != nil {
			p.o.logger.Error("change feed skips a change", "err", err)
		}
		if !ok {
			continue
		}
		m.id = "c:" + strconv.FormatInt(rev, 10) + ":" + string(e.Kv.Key)
		m.rev = rev
		msgs = append(msgs, m)
	}
	return msgs
}
