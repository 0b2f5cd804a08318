package natsrpc_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
)

func TestRequestReply(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	log := slog.New(slog.DiscardHandler)

	if _, err := natsrpc.Serve(nc, "test.echo", "q", log, func(_ context.Context, p []byte) ([]byte, error) {
		return append([]byte("echo:"), p...), nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := natsrpc.Serve(nc, "test.notfound", "q", log, func(context.Context, []byte) ([]byte, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, "x")
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := natsrpc.Serve(nc, "test.plain", "q", log, func(context.Context, []byte) ([]byte, error) {
		return nil, errors.New("boom")
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
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
// connection while requests flow, none of them fails.
func TestQueueGroupSpreadsAndSurvives(t *testing.T) {
	srv := natstest.Start(t)
	log := slog.New(slog.DiscardHandler)
	var counts [2]atomic.Int64
	var conns [2]interface{ Close() }
	for i := range 2 {
		nc := srv.Connect(t)
		conns[i] = nc
		_, err := natsrpc.Serve(nc, "test.q", "q", log, func(context.Context, []byte) ([]byte, error) {
			counts[i].Add(1)
			return []byte("ok"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
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

func TestRequestTimesOut(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	release := make(chan struct{})
	defer close(release)
	if _, err := natsrpc.Serve(nc, "test.slow", "q", slog.New(slog.DiscardHandler), func(context.Context, []byte) ([]byte, error) {
		<-release
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := natsrpc.Request(ctx, nc, "test.slow", nil)
	var se *apierrors.StatusError
	if !errors.As(err, &se) || se.Status().Code != http.StatusGatewayTimeout {
		t.Fatalf("a slow reply: %v, want 504 Timeout", err)
	}
}
