package natsrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/proto/rpc"
)

// HeaderError marks an error reply (proto/rpc).
const HeaderError = rpc.HeaderError

const (
	// DefaultTimeout bounds a request whose context has no deadline.
	DefaultTimeout = 5 * time.Second
	// AckTimeout is how long a replica has to take a request; a replica
	// that receives it later drops it.
	AckTimeout = time.Second
	// ackMargin is how long past ack-by a requester still waits for an
	// acknowledgement on its way before it sends the request again.
	ackMargin = time.Second
	// deadAfter is the silence after which a replica that took a request
	// is presumed dead: three heartbeats missed.
	deadAfter = 3 * rpc.HeartbeatInterval
	// replyBuffer holds what a replica sends for one request before the
	// requester reads it: the acknowledgement, a heartbeat, the reply.
	replyBuffer = 8
	// noRespondersStatus is the status NATS puts on the empty message it
	// sends to the reply subject of a request that no one subscribes to.
	noRespondersStatus = "503"
	// retryBackoff is the pause before a request is sent again.
	retryBackoff = 20 * time.Millisecond
	// DefaultMaxConcurrent bounds the requests one replica works on at once.
	DefaultMaxConcurrent = 256
	// DefaultMaxHandlerTimeout bounds one request's work whatever its
	// requester's deadline: kube's longest request timeout.
	DefaultMaxHandlerTimeout = 60 * time.Second
)

// Handler answers one request's payload. ctx ends at the requester's
// deadline. An error that is a Kubernetes status error
// (apierrors.APIStatus) reaches the requester as it is; any other becomes
// a 500 InternalError.
type Handler func(ctx context.Context, payload []byte) ([]byte, error)

// Server answers subjects in queue groups, so that adding a replica is
// only starting it. It owns the goroutine of every request it works on,
// bounds how many run at once, and drains: Drain hands queued requests to
// the other replicas and waits for the ones taken.
type Server struct {
	nc         *nats.Conn
	log        *slog.Logger
	slots      chan struct{}
	maxHandler time.Duration
	// observer is nil when replies report nothing.
	observer *Observer

	// mu guards subs and draining.
	mu       sync.Mutex
	subs     []*nats.Subscription
	draining bool
	// stopped is set when Drain begins; from then on a request is not
	// taken, even one NATS delivered before it learnt of the drain, so
	// that its requester sends it to another replica.
	stopped atomic.Bool
	// working counts the requests taken and not yet answered.
	working sync.WaitGroup
}

// ServerOption changes a Server.
type ServerOption func(*Server)

// WithMaxConcurrent bounds the requests worked on at once; a request
// beyond it is answered at once with 429 TooManyRequests.
func WithMaxConcurrent(n int) ServerOption {
	return func(s *Server) { s.slots = make(chan struct{}, n) }
}

// WithMaxHandlerTimeout bounds one request's work whatever its requester's
// deadline.
func WithMaxHandlerTimeout(d time.Duration) ServerOption {
	return func(s *Server) { s.maxHandler = d }
}

// NewServer returns a Server answering on nc.
func NewServer(nc *nats.Conn, log *slog.Logger, opts ...ServerOption) *Server {
	s := &Server{nc: nc, log: log, slots: make(chan struct{}, DefaultMaxConcurrent), maxHandler: DefaultMaxHandlerTimeout}
	for _, o := range opts {
		o(s)
	}
	return s
}

// errDraining refuses a subscription made after Drain began.
var errDraining = errors.New("the server is draining")

// Handle answers subject in queue group queue with h.
func (s *Server) Handle(subject, queue string, h Handler) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return fmt.Errorf("answer %s: %w", subject, errDraining)
	}
	sub, err := s.nc.QueueSubscribe(subject, queue, func(m *nats.Msg) { s.receive(m, queue, h) })
	if err != nil {
		return fmt.Errorf("subscribe to %s in queue %s: %w", subject, queue, err)
	}
	s.subs = append(s.subs, sub)
	return nil
}

// Drain stops taking requests (NATS gives them to the other replicas),
// waits for the ones taken to be answered and their replies sent, and
// gives up when ctx ends.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.stopped.Store(true)
	subs := s.subs
	s.mu.Unlock()
	for _, sub := range subs {
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Warn("drain subscription", "subject", sub.Subject, "err", err)
		}
	}
	// A drained subscription has delivered every message it held: no
	// request can be taken after that.
	for _, sub := range subs {
		for sub.IsValid() {
			select {
			case <-ctx.Done():
				return fmt.Errorf("drain %s: %w", sub.Subject, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	done := make(chan struct{})
	go func() {
		s.working.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("wait for requests in progress: %w", ctx.Err())
	}
	flush := s.nc.Flush
	if _, ok := ctx.Deadline(); ok {
		flush = func() error { return s.nc.FlushWithContext(ctx) }
	}
	if err := flush(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		return fmt.Errorf("flush replies: %w", err)
	}
	return nil
}

// receive takes a request, or drops it when it came after its ack-by
// time (its requester has sent it again), or refuses it when the replica
// is full. It runs on the subscription's delivery goroutine.
func (s *Server) receive(m *nats.Msg, queue string, h Handler) {
	if m.Reply == "" {
		return
	}
	if s.stopped.Load() {
		// Not acknowledged: the requester sends it again, to a replica
		// that is not draining.
		s.log.Debug("left a request received while draining to another replica", "subject", m.Subject)
		return
	}
	received := time.Now()
	if ackBy, ok := unixNanos(m.Header.Get(rpc.HeaderAckBy)); ok && received.After(ackBy) {
		s.log.Debug("dropped a request received after its ack-by time", "subject", m.Subject)
		return
	}
	select {
	case s.slots <- struct{}{}:
	default:
		s.reply(m, nil, apierrors.NewTooManyRequests("Too many requests, please try again later.", 1))
		return
	}
	s.control(m, rpc.ControlAck)
	s.working.Add(1)
	go func() {
		defer s.working.Done()
		defer func() { <-s.slots }()
		s.serve(m, queue, h, received)
	}()
}

// serve runs h until the requester's deadline, telling the requester it
// is alive while it works.
func (s *Server) serve(m *nats.Msg, queue string, h Handler, received time.Time) {
	deadline := received.Add(s.maxHandler)
	if d, ok := unixNanos(m.Header.Get(rpc.HeaderDeadline)); ok && d.Before(deadline) {
		deadline = d
	}
	ctx, span := s.observer.startServe(context.Background(), m, queue)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	stop := make(chan struct{})
	var beating sync.WaitGroup
	beating.Go(func() {
		t := time.NewTicker(rpc.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				s.control(m, rpc.ControlHeartbeat)
			}
		}
	})
	out, err := h(ctx, m.Data)
	close(stop)
	beating.Wait()
	s.reply(m, out, err)
	if s.observer != nil {
		endWithError(span, err)
	}
}

// control sends the requester a message that is not the reply.
func (s *Server) control(m *nats.Msg, kind string) {
	msg := nats.NewMsg(m.Reply)
	msg.Header.Set(rpc.HeaderControl, kind)
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("tell the requester", "subject", m.Subject, "control", kind, "err", err)
	}
}

// reply sends out, or err as an error reply.
func (s *Server) reply(m *nats.Msg, out []byte, err error) {
	msg := nats.NewMsg(m.Reply)
	if err != nil {
		status := toStatus(err)
		if status.Code >= http.StatusInternalServerError {
			s.log.Error("review failed", "subject", m.Subject, "err", err)
		}
		msg.Header.Set(rpc.HeaderError, strconv.Itoa(int(status.Code)))
		if out, err = json.Marshal(status); err != nil {
			s.log.Error("encode error reply", "subject", m.Subject, "err", err)
			return
		}
	}
	msg.Data = out
	if err := s.nc.PublishMsg(msg); err != nil {
		s.log.Warn("reply", "subject", m.Subject, "err", err)
	}
}

// toStatus is err as the Status a client would see.
func toStatus(err error) *metav1.Status {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		s = apierrors.NewInternalError(err)
	}
	status := s.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	return &status
}

// RequestOption changes one request.
type RequestOption func(*requestOptions)

type requestOptions struct {
	idempotent bool
	// observer is nil when the request reports nothing.
	observer *Observer
}

// Idempotent marks a request that may be sent again after the replica
// that took it died, because acting on it twice is harmless: read-only
// reviews, signing a token.
func Idempotent() RequestOption { return func(o *requestOptions) { o.idempotent = true } }

// outcome is how one attempt of a request ended.
type outcome int

const (
	// answered: a reply (or a local failure) ends the request.
	answered outcome = iota
	// noResponders: no replica subscribes; nobody took it.
	noResponders
	// notTaken: no replica acknowledged it by its ack-by time; none will
	// act on it.
	notTaken
	// lost: a replica took it and went silent.
	lost
	// expired: the requester's deadline passed.
	expired
	// notSent: the request could not be sent (the connection is closed).
	notSent
)

// Request sends payload on subject and returns the reply's payload, or
// the error the replica sent as a *apierrors.StatusError. With no deadline
// in ctx, DefaultTimeout applies.
//
// A request is sent again, until ctx ends, only when no replica took it
// (none subscribes, or none acknowledged it in time: a replica restarting,
// a message lost with a dying connection), or, for an Idempotent request,
// when the replica that took it died. A slow replica is waited for, never
// asked twice. A non-idempotent request whose replica died answers 503:
// it may have been processed.
func Request(ctx context.Context, nc *nats.Conn, subject string, payload []byte, opts ...RequestOption) ([]byte, error) {
	var o requestOptions
	for _, opt := range opts {
		opt(&o)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	start := time.Now()
	ctx, span := o.observer.startRequest(ctx, subject, len(payload))
	out, result, attempts, err := request(ctx, nc, subject, payload, o)
	o.observer.endRequest(span, subject, result, attempts, start, err)
	return out, err
}

// request sends the request until it is answered or may not be sent
// again, and says how it ended (an Outcome) after how many attempts.
func request(ctx context.Context, nc *nats.Conn, subject string, payload []byte, o requestOptions) ([]byte, string, int, error) {
	// sawNoResponders remembers whether the last attempt that ended on its
	// own found no replica: a caller with a short deadline and no replica
	// at all must see 503, not a timeout.
	sawNoResponders := false
	for attempts := 1; ; attempts++ {
		out, result, err := attempt(ctx, nc, subject, payload, o.observer)
		switch result {
		case answered:
			if err != nil {
				return nil, OutcomeError, attempts, err
			}
			return out, OutcomeSuccess, attempts, nil
		case notSent:
			return nil, OutcomeUnavailable, attempts, err
		case noResponders:
			sawNoResponders = true
		case notTaken:
			sawNoResponders = false
		case lost:
			if !o.idempotent {
				return nil, OutcomeUnavailable, attempts, apierrors.NewServiceUnavailable(fmt.Sprintf("the %s replica working on the request stopped answering; the request may have been processed and was not sent again", subject))
			}
			sawNoResponders = false
		}
		select {
		case <-ctx.Done():
			if sawNoResponders {
				return nil, OutcomeUnavailable, attempts, apierrors.NewServiceUnavailable(fmt.Sprintf("no %s replica is available", subject))
			}
			return nil, OutcomeTimeout, attempts, apierrors.NewTimeoutError(fmt.Sprintf("no reply on %s in time", subject), 1)
		case <-time.After(retryBackoff):
		}
	}
}

// attempt sends the request once and follows it until it is answered, or
// nobody takes it, or the replica that took it goes silent.
func attempt(ctx context.Context, nc *nats.Conn, subject string, payload []byte, obs *Observer) ([]byte, outcome, error) {
	// The connection's own inbox: under kplane's NATS permissions no other
	// service may read it. A small channel: SubscribeSync's default holds
	// 64K messages, an allocation that would cost more than the request.
	replies := make(chan *nats.Msg, replyBuffer)
	sub, err := nc.ChanSubscribe(nc.NewInbox(), replies)
	if err != nil {
		return nil, notSent, apierrors.NewServiceUnavailable(fmt.Sprintf("request on %s: %v", subject, err))
	}
	defer func() { _ = sub.Unsubscribe() }()
	deadline, _ := ctx.Deadline()
	ackBy := time.Now().Add(AckTimeout)
	msg := nats.NewMsg(subject)
	msg.Reply = sub.Subject
	msg.Data = payload
	msg.Header.Set(rpc.HeaderDeadline, strconv.FormatInt(deadline.UnixNano(), 10))
	msg.Header.Set(rpc.HeaderAckBy, strconv.FormatInt(ackBy.UnixNano(), 10))
	obs.inject(ctx, msg.Header)
	if err := nc.PublishMsg(msg); err != nil {
		return nil, notSent, apierrors.NewServiceUnavailable(fmt.Sprintf("request on %s: %v", subject, err))
	}
	wait := time.Until(ackBy.Add(ackMargin))
	acked := false
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		var m *nats.Msg
		select {
		case <-ctx.Done():
			return nil, expired, nil
		case <-timer.C:
			if !acked {
				return nil, notTaken, nil
			}
			return nil, lost, nil
		case m = <-replies:
		}
		if len(m.Data) == 0 && m.Header.Get("Status") == noRespondersStatus {
			return nil, noResponders, nil
		}
		switch m.Header.Get(rpc.HeaderControl) {
		case rpc.ControlAck, rpc.ControlHeartbeat:
			acked = true
			timer.Reset(deadAfter)
			continue
		}
		if code := m.Header.Get(rpc.HeaderError); code != "" {
			return nil, answered, fromReply(code, m.Data)
		}
		return m.Data, answered, nil
	}
}

// RequestJSON sends in as JSON on subject and decodes the reply into out.
func RequestJSON(ctx context.Context, nc *nats.Conn, subject string, in, out any, opts ...RequestOption) error {
	payload, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request on %s: %w", subject, err)
	}
	reply, err := Request(ctx, nc, subject, payload, opts...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(reply, out); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("decode reply on %s: %w", subject, err))
	}
	return nil
}

// fromReply rebuilds the status error of an error reply.
func fromReply(code string, body []byte) error {
	var status metav1.Status
	if err := json.Unmarshal(body, &status); err != nil || status.Status == "" {
		n, _ := strconv.Atoi(code)
		return apierrors.NewGenericServerResponse(n, "", schema.GroupResource{}, "", string(body), 0, false)
	}
	return &apierrors.StatusError{ErrStatus: status}
}

// unixNanos reads a time header.
func unixNanos(v string) (time.Time, bool) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, n), true
}
