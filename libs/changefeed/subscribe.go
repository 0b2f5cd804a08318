package changefeed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"kplane.dev/libs/tracing"
	proto "kplane.dev/proto/changefeed"
)

// ErrExpired says the stream no longer holds every change after the
// requested revision: list again, and subscribe from that list's
// resourceVersion (kube-apiserver answers such a watch with 410 Gone).
var ErrExpired = errors.New("the change feed no longer holds the changes after this revision")

// Handler handles one event. An error stops Subscribe, which returns it.
type Handler func(ctx context.Context, e proto.Event) error

type subscribeOptions struct {
	stream, subjectRoot string
	tracing             *tracing.Provider
}

// SubscribeOption configures Subscribe.
type SubscribeOption func(*subscribeOptions)

// FromStream follows stream name, whose subjects are below subjectRoot
// (default proto StreamName and SubjectRoot).
func FromStream(name, subjectRoot string) SubscribeOption {
	return func(o *subscribeOptions) { o.stream, o.subjectRoot = name, subjectRoot }
}

// Traced hands each event to the handler in a consumer span that
// continues the trace its message carries (WithTracing).
func Traced(tp *tracing.Provider) SubscribeOption {
	return func(o *subscribeOptions) { o.tracing = tp }
}

// Subscribe hands handle, in stream order, every event on subjects
// matching filter (such as "kplane.changes.core.v1.configmaps" or
// "kplane.changes.>") whose revision is after fromRevision, and every
// resync marker after it, until ctx ends (it then returns nil) or handle
// fails. fromRevision is a list's resourceVersion; 0 starts at the
// oldest message the stream holds. It returns ErrExpired if the stream
// dropped messages that may have followed fromRevision.
func Subscribe(ctx context.Context, js jetstream.JetStream, filter string, fromRevision int64, handle Handler, opts ...SubscribeOption) error {
	o := subscribeOptions{stream: proto.StreamName, subjectRoot: proto.SubjectRoot}
	for _, opt := range opts {
		opt(&o)
	}
	stream, err := js.Stream(ctx, o.stream)
	if err != nil {
		return fmt.Errorf("open stream %s: %w", o.stream, err)
	}
	resync := o.subjectRoot + ".resync"
	start, err := startSequence(ctx, stream, o.subjectRoot+".>", resync, fromRevision)
	if err != nil {
		return err
	}
	filters := []string{filter}
	if !subjectMatches(filter, resync) {
		filters = append(filters, resync)
	}
	cons, err := js.OrderedConsumer(ctx, o.stream, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters,
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    start,
	})
	if err != nil {
		return fmt.Errorf("create consumer of stream %s: %w", o.stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("consume stream %s: %w", o.stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read stream %s: %w", o.stream, err)
		}
		rev, err := revision(msg.Headers())
		if err != nil {
			return fmt.Errorf("message on %s: %w", msg.Subject(), err)
		}
		if rev <= fromRevision {
			continue
		}
		var e proto.Event
		if err := json.Unmarshal(msg.Data(), &e); err != nil {
			return fmt.Errorf("decode message on %s at revision %d: %w", msg.Subject(), rev, err)
		}
		if err := o.handle(ctx, msg, e, handle); err != nil {
			return err
		}
	}
}

// startSequence finds the first message whose revision is after
// fromRevision: revisions never decrease along the stream.
func startSequence(ctx context.Context, stream jetstream.Stream, all, resync string, fromRevision int64) (uint64, error) {
	info, err := stream.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("read stream: %w", err)
	}
	st := info.State
	if st.Msgs == 0 {
		return st.LastSeq + 1, nil
	}
	if fromRevision <= 0 {
		return st.FirstSeq, nil
	}
	// at reads the first message at or after seq, so that a hole in
	// the sequences does not stop the search.
	at := func(seq uint64) (*jetstream.RawStreamMsg, int64, error) {
		msg, err := stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(all))
		if err != nil {
			return nil, 0, fmt.Errorf("read message %d: %w", seq, err)
		}
		rev, err := revision(msg.Header)
		if err != nil {
			return nil, 0, fmt.Errorf("message %d: %w", msg.Sequence, err)
		}
		return msg, rev, nil
	}
	lo, hi := st.FirstSeq, st.LastSeq+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		msg, rev, err := at(mid)
		if err != nil {
			return 0, err
		}
		if rev > fromRevision {
			hi = mid
		} else {
			lo = msg.Sequence + 1
		}
	}
	if lo == st.FirstSeq && st.FirstSeq > 1 {
		// The messages before the first were dropped; unless the first
		// is a resync marker, which tells the consumer to start over
		// anyway, they may have held changes after fromRevision.
		msg, _, err := at(lo)
		if err != nil {
			return 0, err
		}
		if msg.Subject != resync {
			return 0, fmt.Errorf("revision %d, the oldest message is at revision %s: %w", fromRevision, msg.Header.Get(proto.HeaderRevision), ErrExpired)
		}
	}
	return lo, nil
}

// subjectMatches says whether NATS subject filter matches subject.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	for i, tok := range f {
		switch {
		case tok == ">":
			return len(s) > i
		case i >= len(s):
			return false
		case tok != "*" && tok != s[i]:
			return false
		}
	}
	return len(f) == len(s)
}

// handle runs h on e, in a span of its own when o traces.
func (o *subscribeOptions) handle(ctx context.Context, msg jetstream.Msg, e proto.Event, h Handler) error {
	if !o.tracing.Enabled() {
		return h(ctx, e)
	}
	ctx = o.tracing.Extract(ctx, tracing.NATSHeader(msg.Headers()))
	ctx, span := o.tracing.Start(ctx, scope, "process "+msg.Subject(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationName(msg.Subject()),
			semconv.MessagingOperationName("process"),
			semconv.MessagingOperationTypeProcess,
		))
	err := h(ctx, e)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}
