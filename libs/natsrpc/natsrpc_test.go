package natsrpc_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/proto/rpc"
)

var discard = slog.New(slog.DiscardHandler)

// serve answers subject in queue "q" on a connection of its own, which it
// returns with the server.
func serve(t *testing.T, srv *natstest.Server, subject string, h natsrpc.Handler, opts ...natsrpc.ServerOption) (*natsrpc.Server, *nats.Conn) {
	t.Helper()
	nc := srv.Connect(t)
	s := natsrpc.NewServer(nc, discard, opts...)
	if err := s.Handle(subject, "q", h); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s, nc
}

func statusCode(err error) int {
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		return 0
	}
	return int(se.Status().Code)
}

func TestRequestReply(t *testing.T) {
	srv := natstest.Start(t)
	serve(t, srv, "test.echo", func(_ context.Context, p []byte) ([]byte, error) {
		return append([]byte("echo:"), p...), nil
	})
	serve(t, srv, "test.notfound", func(context.Context, []byte) ([]byte, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "x")
	})
	serve(t, srv, "test.plain", func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("boom")
	})
	nc := srv.Connect(t)
	ctx := context.Background()

	got, err := natsrpc.Request(ctx, nc, "test.echo", []byte("hi"))
	if err != nil || string(got) != "echo:hi" {
		t.Fatalf("echo = %q, %v", got, err)
	}
	_, err = natsrpc.Request(ctx, nc, "test.notfound", nil)
	if !apierrors.IsNotFound(err) || err.Error() != `serviceaccounts "x" not found` {
		t.Fatalf("a NotFound reply: %v", err)
	}
	_, err = natsrpc.Request(ctx, nc, "test.plain", nil)
	if !apierrors.IsInternalError(err) {
		t.Fatalf("a plain error: %v, want InternalError", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = natsrpc.Request(short, nc, "test.nobody", nil)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("no responders: %v, want ServiceUnavailable", err)
	}
}

// TestQueueGroupSpreadsAndSurvives has two replicas in one queue group:
// each request is answered once, by either, and when one closes its
// connection between requests, none of them fails.
func TestQueueGroupSpreadsAndSurvives(t *testing.T) {
	srv := natstest.Start(t)
	var counts [2]atomic.Int64
	var conns [2]*nats.Conn
	for i := range 2 {
		_, conns[i] = serve(t, srv, "test.q", func(context.Context, []byte) ([]byte, error) {
			counts[i].Add(1)
			return []byte("ok"), nil
		})
	}
	client := srv.Connect(t)
	for range 100 {
		if _, err := natsrpc.Request(context.Background(), client, "test.q", nil); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := counts[0].Load(), counts[1].Load(); a+b != 100 || a == 0 || b == 0 {
		t.Fatalf("replicas answered %d and %d of 100", a, b)
	}
	before := counts[1].Load()
	for i := range 50 {
		if i == 10 {
			conns[0].Close()
		}
		if _, err := natsrpc.Request(context.Background(), client, "test.q", nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := counts[1].Load() - before; n < 40 {
		t.Fatalf("the remaining replica answered %d of 50 after the other closed", n)
	}
}

// TestSlowReplicaAskedOnce: a replica that takes longer than the ack
// timeout and the heartbeat interval is waited for, and never receives the
// request a second time, whether the request is idempotent or not.
func TestSlowReplicaAskedOnce(t *testing.T) {
	srv := natstest.Start(t)
	var calls atomic.Int64
	serve(t, srv, "test.slow", func(ctx context.Context, _ []byte) ([]byte, error) {
		calls.Add(1)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(3500 * time.Millisecond):
		}
		return []byte("done"), nil
	})
	nc := srv.Connect(t)
	for _, opts := range [][]natsrpc.RequestOption{nil, {natsrpc.Idempotent()}} {
		calls.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := natsrpc.Request(ctx, nc, "test.slow", nil, opts...)
		cancel()
		if err != nil || string(got) != "done" {
			t.Fatalf("a slow reply: %q %v", got, err)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("the slow replica was asked %d times, want once", n)
		}
	}
}

// TestHandlerSeesCallersDeadline: the handler's context ends when the
// requester's does.
func TestHandlerSeesCallersDeadline(t *testing.T) {
	srv := natstest.Start(t)
	seen := make(chan time.Time, 1)
	serve(t, srv, "test.deadline", func(ctx context.Context, _ []byte) ([]byte, error) {
		d, _ := ctx.Deadline()
		seen <- d
		return nil, nil
	})
	nc := srv.Connect(t)
	want := time.Now().Add(7 * time.Second)
	ctx, cancel := context.WithDeadline(context.Background(), want)
	defer cancel()
	if _, err := natsrpc.Request(ctx, nc, "test.deadline", nil); err != nil {
		t.Fatal(err)
	}
	if got := <-seen; got.Sub(want).Abs() > time.Millisecond {
		t.Errorf("handler deadline %v, want the caller's %v", got, want)
	}
}

// TestReplicaDiesHoldingRequest: a replica that took a request and died
// (its connection closed mid-work) is detected by its missing heartbeats;
// an idempotent request is answered by the other replica, a non-idempotent
// one gets 503 and was not run twice.
func TestReplicaDiesHoldingRequest(t *testing.T) {
	for _, idempotent := range []bool{true, false} {
		t.Run("idempotent="+strconv.FormatBool(idempotent), func(t *testing.T) {
			srv := natstest.Start(t)
			took := make(chan struct{}, 1)
			var dyingCalls, healthyCalls atomic.Int64
			_, dying := serve(t, srv, "test.die", func(ctx context.Context, _ []byte) ([]byte, error) {
				dyingCalls.Add(1)
				took <- struct{}{}
				<-ctx.Done()
				return nil, ctx.Err()
			})
			nc := srv.Connect(t)
			var opts []natsrpc.RequestOption
			if idempotent {
				opts = append(opts, natsrpc.Idempotent())
			}
			type result struct {
				out []byte
				err error
			}
			done := make(chan result, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				defer cancel()
				out, err := natsrpc.Request(ctx, nc, "test.die", nil, opts...)
				done <- result{out, err}
			}()
			<-took
			// The other replica joins only now, so the dying one took the
			// request.
			serve(t, srv, "test.die", func(context.Context, []byte) ([]byte, error) {
				healthyCalls.Add(1)
				return []byte("healthy"), nil
			})
			dying.Close()
			res := <-done
			switch {
			case idempotent && (res.err != nil || string(res.out) != "healthy"):
				t.Errorf("an idempotent request whose replica died: %q %v, want the other replica's answer", res.out, res.err)
			case !idempotent && statusCode(res.err) != http.StatusServiceUnavailable:
				t.Errorf("a request whose replica died: %q %v, want 503", res.out, res.err)
			case !idempotent && healthyCalls.Load() != 0:
				t.Errorf("a request that may have been processed was sent again")
			}
			if n := dyingCalls.Load(); n != 1 {
				t.Errorf("the dying replica ran the request %d times", n)
			}
		})
	}
}

// TestConcurrencyBound: a replica that works on as many requests as it
// may answers the next at once with 429.
func TestConcurrencyBound(t *testing.T) {
	srv := natstest.Start(t)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	serve(t, srv, "test.busy", func(context.Context, []byte) ([]byte, error) {
		started <- struct{}{}
		<-release
		return []byte("ok"), nil
	}, natsrpc.WithMaxConcurrent(2))
	nc := srv.Connect(t)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := natsrpc.Request(context.Background(), nc, "test.busy", nil)
			errs <- err
		}()
	}
	<-started
	<-started
	_, err := natsrpc.Request(context.Background(), nc, "test.busy", nil)
	if statusCode(err) != http.StatusTooManyRequests || !apierrors.IsTooManyRequests(err) {
		t.Errorf("a request beyond the bound: %v, want 429", err)
	}
	close(release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Errorf("a request within the bound: %v", err)
		}
	}
}

// TestDrain: Drain waits for the request in progress, whose reply still
// reaches its requester, while new requests go to the other replica.
func TestDrain(t *testing.T) {
	srv := natstest.Start(t)
	release := make(chan struct{})
	took := make(chan struct{}, 1)
	draining, _ := serve(t, srv, "test.drain", func(context.Context, []byte) ([]byte, error) {
		took <- struct{}{}
		<-release
		return []byte("first"), nil
	})
	nc := srv.Connect(t)
	first := make(chan error, 1)
	go func() {
		out, err := natsrpc.Request(context.Background(), nc, "test.drain", nil)
		if err == nil && string(out) != "first" {
			err = errors.New("reply " + string(out))
		}
		first <- err
	}()
	<-took
	serve(t, srv, "test.drain", func(context.Context, []byte) ([]byte, error) { return []byte("other"), nil })
	drained := make(chan error, 1)
	go func() { drained <- draining.Drain(context.Background()) }()
	// A request sent before Drain began may rightly be taken by the
	// replica about to drain; Handle refuses once Drain has begun.
	for draining.Handle("test.drain.probe", "probe", func(context.Context, []byte) ([]byte, error) { return nil, nil }) == nil {
		time.Sleep(time.Millisecond)
	}
	for range 5 {
		out, err := natsrpc.Request(context.Background(), nc, "test.drain", nil)
		if err != nil || string(out) != "other" {
			t.Fatalf("a request while one replica drains: %q %v", out, err)
		}
	}
	select {
	case err := <-drained:
		t.Fatalf("Drain returned (%v) while a request was in progress", err)
	default:
	}
	close(release)
	if err := <-first; err != nil {
		t.Errorf("the request in progress at Drain: %v", err)
	}
	if err := <-drained; err != nil {
		t.Errorf("Drain: %v", err)
	}
}

// TestRequestTimesOut: a replica that keeps working past the requester's
// deadline (alive, heartbeating) gets no second copy, and the requester a
// 504.
func TestRequestTimesOut(t *testing.T) {
	srv := natstest.Start(t)
	release := make(chan struct{})
	defer close(release)
	var calls atomic.Int64
	serve(t, srv, "test.hung", func(context.Context, []byte) ([]byte, error) {
		calls.Add(1)
		<-release
		return nil, nil
	})
	nc := srv.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3500*time.Millisecond)
	defer cancel()
	_, err := natsrpc.Request(ctx, nc, "test.hung", nil, natsrpc.Idempotent())
	if statusCode(err) != http.StatusGatewayTimeout {
		t.Fatalf("a hung replica: %v, want 504 Timeout", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the hung replica was asked %d times", n)
	}
}

// TestLateRequestDropped: a request that reaches a replica after its
// ack-by time is not acted on.
func TestLateRequestDropped(t *testing.T) {
	srv := natstest.Start(t)
	var calls atomic.Int64
	serve(t, srv, "test.late", func(context.Context, []byte) ([]byte, error) {
		calls.Add(1)
		return []byte("ok"), nil
	})
	nc := srv.Connect(t)
	sub, err := nc.SubscribeSync(nc.NewInbox())
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg("test.late")
	msg.Reply = sub.Subject
	msg.Header.Set(rpc.HeaderAckBy, strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10))
	if err := nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	// A request sent after it is answered: the late one was seen first.
	if _, err := natsrpc.Request(context.Background(), nc, "test.late", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("the late request got an answer")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once (the late request dropped)", n)
	}
}
