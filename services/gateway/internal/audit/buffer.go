package audit

import (
	"context"
	"sync"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/utils/clock"
)

// Encoded is one audit event as every backend sends it.
type Encoded struct {
	AuditID string
	Stage   auditv1.Stage
	// JSON is the audit.k8s.io/v1 Event, apiVersion and kind set.
	JSON []byte
}

// Sink delivers batches of events somewhere; a backend implements it.
type Sink interface {
	// Send delivers events, in order, or fails; ctx ends when the
	// auditor stops waiting for it.
	Send(ctx context.Context, events []Encoded) error
}

// Backend is a sink with the name its metrics carry (kube's plugin label:
// log, webhook; stream for JetStream) and how its events are batched.
type Backend struct {
	Name string
	Sink Sink
	// BufferSize is how many events wait for the sink before new ones are
	// dropped.
	BufferSize int
	// MaxBatchSize and MaxBatchWait bound a batch: it is sent when it is
	// full or its first event waited that long; with MaxBatchWait 0 it
	// is what is queued when the sink is free.
	MaxBatchSize int
	MaxBatchWait time.Duration
}

// buffer queues the events of one backend and sends them in batches from
// its own goroutine.
type buffer struct {
	Backend
	clock clock.Clock
	// failed counts events the sink did not take.
	failed func(n int)

	// mu guards closed: enqueue holds it for reading while it may wait,
	// so close waits at most the enqueue bound for the channel to be
	// free of senders.
	mu     sync.RWMutex
	closed bool
	events chan Encoded
}

func newBuffer(b Backend, clk clock.Clock, failed func(n int)) *buffer {
	return &buffer{Backend: b, clock: clk, failed: failed, events: make(chan Encoded, b.BufferSize)}
}

// enqueue queues ev, waiting at most wait for room; false when it was
// not queued.
func (b *buffer) enqueue(ev Encoded, wait time.Duration) bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false
	}
	select {
	case b.events <- ev:
		return true
	default:
	}
	if wait <= 0 {
		return false
	}
	t := b.clock.NewTimer(wait)
	defer t.Stop()
	select {
	case b.events <- ev:
		return true
	case <-t.C():
		return false
	}
}

// run sends batches until the buffer is closed and empty.
func (b *buffer) run(ctx context.Context) {
	for {
		first, ok := <-b.events
		if !ok {
			return
		}
		batch := b.collect(first)
		if err := b.Sink.Send(ctx, batch); err != nil {
			b.failed(len(batch))
		}
	}
}

// collect fills a batch after first: with what is queued already when
// MaxBatchWait is 0, else with what comes within MaxBatchWait.
func (b *buffer) collect(first Encoded) []Encoded {
	batch := []Encoded{first}
	if b.MaxBatchWait <= 0 {
		for len(batch) < b.MaxBatchSize {
			select {
			case ev, ok := <-b.events:
				if !ok {
					return batch
				}
				batch = append(batch, ev)
			default:
				return batch
			}
		}
		return batch
	}
	t := b.clock.NewTimer(b.MaxBatchWait)
	defer t.Stop()
	for len(batch) < b.MaxBatchSize {
		select {
		case ev, ok := <-b.events:
			if !ok {
				return batch
			}
			batch = append(batch, ev)
		case <-t.C():
			return batch
		}
	}
	return batch
}

// close stops taking events; run sends what is queued and ends.
func (b *buffer) close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.events)
	}
}
