package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	auditstream "kplane.dev/proto/audit"
	"kplane.dev/services/gateway/internal/audit"
)

const (
	// DefaultStreamMaxAge is how long the stream keeps an event unless
	// told otherwise.
	DefaultStreamMaxAge = 7 * 24 * time.Hour
	// DefaultStreamMaxBytes bounds the stream's size; the oldest events
	// go first.
	DefaultStreamMaxBytes = 1 << 30
	// streamCallTimeout bounds each call to JetStream and the wait for a
	// batch's acknowledgements.
	streamCallTimeout = 10 * time.Second
)

// Stream publishes each event on the JetStream stream of
// kplane.dev/proto/audit, creating the stream when it is missing.
type Stream struct {
	js       jetstream.JetStream
	maxAge   time.Duration
	maxBytes int64
	replicas int

	// mu guards ready: the stream is looked up again after a failure.
	mu    sync.Mutex
	ready bool
}

var _ audit.Sink = (*Stream)(nil)

// StreamOption configures a Stream.
type StreamOption func(*Stream)

// WithStreamMaxAge sets how long a stream the gateway creates keeps an
// event.
func WithStreamMaxAge(d time.Duration) StreamOption { return func(s *Stream) { s.maxAge = d } }

// WithStreamMaxBytes bounds the size of a stream the gateway creates.
func WithStreamMaxBytes(n int64) StreamOption { return func(s *Stream) { s.maxBytes = n } }

// WithStreamReplicas sets the replicas of a stream the gateway creates.
func WithStreamReplicas(n int) StreamOption { return func(s *Stream) { s.replicas = n } }

// NewStream publishes over nc.
func NewStream(nc *nats.Conn, opts ...StreamOption) (*Stream, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	s := &Stream{js: js, maxAge: DefaultStreamMaxAge, maxBytes: DefaultStreamMaxBytes, replicas: 1}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// ensure creates the stream unless it exists; an existing stream is kept
// as the operator set it, since the gateway may create it but not change
// it.
func (s *Stream) ensure(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, streamCallTimeout)
	defer cancel()
	_, err := s.js.Stream(ctx, auditstream.StreamName)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = s.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        auditstream.StreamName,
			Description: "kplane audit events, audit.k8s.io/v1 (see kplane.dev/proto/audit)",
			Subjects:    []string{auditstream.StreamSubjects},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      s.maxAge,
			MaxBytes:    s.maxBytes,
			Replicas:    s.replicas,
			Storage:     jetstream.FileStorage,
			Duplicates:  2 * time.Minute,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another gateway replica created it first.
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("audit stream %s: %w", auditstream.StreamName, err)
	}
	s.ready = true
	return nil
}

// Send publishes the batch and waits for every acknowledgement.
func (s *Stream) Send(ctx context.Context, events []audit.Encoded) error {
	if err := s.ensure(ctx); err != nil {
		return err
	}
	acks := make([]jetstream.PubAckFuture, 0, len(events))
	for _, ev := range events {
		msg := nats.NewMsg(auditstream.Subject(string(ev.Stage)))
		msg.Data = ev.JSON
		msg.Header.Set(auditstream.HeaderMsgID, auditstream.MsgID(ev.AuditID, string(ev.Stage)))
		f, err := s.js.PublishMsgAsync(msg)
		if err != nil {
			return fmt.Errorf("publish audit event: %w", err)
		}
		acks = append(acks, f)
	}
	ctx, cancel := context.WithTimeout(ctx, streamCallTimeout)
	defer cancel()
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			s.mu.Lock()
			s.ready = false
			s.mu.Unlock()
			return fmt.Errorf("publish audit event: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("audit stream acknowledgement: %w", ctx.Err())
		}
	}
	return nil
}
