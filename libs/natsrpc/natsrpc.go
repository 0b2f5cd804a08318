package natsrpc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// HeaderError marks an error reply; proto/authn and proto/authz name the
// same header for their subjects.
const HeaderError = "Kplane-Error"

const (
	// DefaultTimeout bounds a request whose context has no deadline.
	DefaultTimeout = 5 * time.Second
	// AttemptTimeout bounds one attempt of a request: far above a review's
	// time, so that only a lost request reaches it.
	AttemptTimeout = time.Second
	// retryBackoff is the pause before a request is sent again.
	retryBackoff = 20 * time.Millisecond
)

// Handler answers one request's payload. An error that is a Kubernetes
// status error (apierrors.APIStatus) reaches the caller as it is; any other
// becomes a 500 InternalError.
type Handler func(ctx context.Context, payload []byte) ([]byte, error)

// Serve answers subject in queue group queue with h until the returned
// subscription is drained or unsubscribed, or nc closes. Each request is
// handled on its own goroutine, bounded by nats.go's pending limits, so
// that one slow review does not hold up the others.
func Serve(nc *nats.Conn, subject, queue string, log *slog.Logger, h Handler) (*nats.Subscription, error) {
	sub, err := nc.QueueSubscribe(subject, queue, func(m *nats.Msg) {
		go handle(m, log, h)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s in queue %s: %w", subject, queue, err)
	}
	return sub, nil
}

func handle(m *nats.Msg, log *slog.Logger, h Handler) {
	if m.Reply == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	out, err := h(ctx, m.Data)
	reply := nats.NewMsg(m.Reply)
	if err != nil {
		status := toStatus(err)
		if status.Code >= http.StatusInternalServerError {
			log.Error("review failed", "subject", m.Subject, "err", err)
		}
		reply.Header.Set(HeaderError, strconv.Itoa(int(status.Code)))
		out, err = json.Marshal(status)
		if err != nil {
			log.Error("encode error reply", "subject", m.Subject, "err", err)
			return
		}
	}
	reply.Data = out
	if err := m.RespondMsg(reply); err != nil {
		log.Warn("reply", "subject", m.Subject, "err", err)
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

// Request sends payload on subject and returns the reply's payload, or the
// error the server sent as a *apierrors.StatusError. With no deadline in
// ctx, DefaultTimeout applies.
//
// Reviews are read-only, so a request is sent again when an attempt gets
// no reply within AttemptTimeout (its replica died holding it) or finds no
// replica (one is restarting), until ctx ends: losing a replica mid-load
// costs latency, not failed requests.
func Request(ctx context.Context, nc *nats.Conn, subject string, payload []byte) ([]byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	// noResponders remembers whether the last attempt that ended on its
	// own found no replica: an attempt cut short by ctx itself says
	// nothing new, and a caller with a short deadline and no replica at
	// all must see 503, not a timeout.
	noResponders := false
	for {
		attempt, cancel := context.WithTimeout(ctx, AttemptTimeout)
		msg, err := nc.RequestWithContext(attempt, subject, payload)
		cancel()
		if err == nil {
			if code := msg.Header.Get(HeaderError); code != "" {
				return nil, fromReply(code, msg.Data)
			}
			return msg.Data, nil
		}
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		switch {
		case errors.Is(err, nats.ErrNoResponders):
			noResponders = true
		case timedOut && ctx.Err() == nil:
			// The attempt's own limit: a replica took the request and
			// died, or is stuck.
			noResponders = false
		case timedOut:
		default:
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("request on %s: %v", subject, err))
		}
		select {
		case <-ctx.Done():
			if noResponders {
				return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("no %s replica is available", subject))
			}
			return nil, apierrors.NewTimeoutError(fmt.Sprintf("no reply on %s in time", subject), 1)
		case <-time.After(retryBackoff):
		}
	}
}

// RequestJSON sends in as JSON on subject and decodes the reply into out.
func RequestJSON(ctx context.Context, nc *nats.Conn, subject string, in, out any) error {
	payload, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("encode request on %s: %w", subject, err)
	}
	reply, err := Request(ctx, nc, subject, payload)
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
