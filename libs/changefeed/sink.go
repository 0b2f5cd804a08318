package changefeed

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"kplane.dev/libs/tracing"
	proto "kplane.dev/proto/changefeed"
)

// sink publishes to the stream in order, several messages in flight,
// each expecting the stream's last sequence to be the previous one's: a
// publisher that is not the only one writing fails instead of
// interleaving.
type sink struct {
	js      jetstream.JetStream
	seq     uint64 // the stream's last sequence once every pending publish lands
	pending []jetstream.PubAckFuture
	tracing *tracing.Provider
}

// publishMessage publishes m; part is "i/n" for a change, snapshot is set
// for a snapshot object.
func (s *sink) publishMessage(ctx context.Context, m message, snapshot bool, part string) error {
	data, err := m.encode()
	if err != nil {
		return err
	}
	h := nats.Header{}
	h.Set(proto.HeaderMsgID, m.id)
	h.Set(proto.HeaderRevision, strconv.FormatInt(m.rev, 10))
	if snapshot {
		h.Set(proto.HeaderSnapshot, "true")
	} else {
		h.Set(proto.HeaderRevisionPart, part)
	}
	if !s.tracing.Enabled() {
		return s.publish(ctx, &nats.Msg{Subject: m.subject, Header: h, Data: data})
	}
	// A root: the publisher follows etcd, outside any request.
	spanCtx, span := s.tracing.Start(context.Background(), scope, "publish "+m.subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingDestinationName(m.subject),
			semconv.MessagingOperationName("publish"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingMessageID(m.id),
		))
	s.tracing.Inject(spanCtx, tracing.NATSHeader(h))
	err = s.publish(ctx, &nats.Msg{Subject: m.subject, Header: h, Data: data})
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

// encode is the payload of m. The object goes in as it is, not through
// json.Marshal, which would validate and compact it a second time:
// servedObject made it and it is valid JSON.
func (m message) encode() ([]byte, error) {
	e := m.event
	obj := e.Object
	e.Object = nil
	data, err := json.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("encode change %s: %w", m.id, err)
	}
	if len(obj) == 0 {
		return data, nil
	}
	// data is an object with members (type and resourceVersion are
	// always there): the object goes in as one more before its '}'.
	withObj := make([]byte, 0, len(data)+len(`,"object":`)+len(obj))
	withObj = append(withObj, data[:len(data)-1]...)
	withObj = append(withObj, `,"object":`...)
	withObj = append(withObj, obj...)
	return append(withObj, '}'), nil
}

// scope is the instrumentation scope of the change feed's spans.
const scope = "kplane.dev/libs/changefeed"

func (s *sink) publish(ctx context.Context, msg *nats.Msg) error {
	if len(s.pending) >= maxInFlight {
		if err := s.flush(ctx); err != nil {
			return err
		}
	}
	f, err := s.js.PublishMsgAsync(msg, jetstream.WithExpectLastSequence(s.seq))
	if err != nil {
		return fmt.Errorf("publish %s: %w", msg.Header.Get(proto.HeaderMsgID), err)
	}
	s.seq++
	s.pending = append(s.pending, f)
	return nil
}

// flush waits until every pending publish is stored. After an error the
// sink is done with: the publisher starts over from the stream's end.
func (s *sink) flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	for _, f := range s.pending {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				return fmt.Errorf("publish %s: the stream holds it already, so another publisher is writing", f.Msg().Header.Get(proto.HeaderMsgID))
			}
		case err := <-f.Err():
			return fmt.Errorf("publish %s: %w", f.Msg().Header.Get(proto.HeaderMsgID), err)
		case <-ctx.Done():
			return fmt.Errorf("wait for the acknowledgement of %s: %w", f.Msg().Header.Get(proto.HeaderMsgID), ctx.Err())
		}
	}
	s.pending = s.pending[:0]
	return nil
}
