package invalidate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/natstest"
	"kplane.dev/proto/authz"
)

func TestCoalescing(t *testing.T) {
	const due, quiet = 5 * time.Second, 200 * time.Millisecond
	srv := natstest.Start(t)
	subConn := srv.Connect(t)
	sub, err := subConn.SubscribeSync(authz.SubjectInvalidate)
	if err != nil {
		t.Fatal(err)
	}
	// The server must know the subscription before anything is published.
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	p := New(srv.Connect(t), WithClock(clk))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	// next waits for a publish: long when one is due, so a busy machine
	// does not fail the test; briefly when none may come.
	next := func(t *testing.T, wait time.Duration) (authz.Invalidation, bool) {
		t.Helper()
		m, err := sub.NextMsg(wait)
		if err == nats.ErrTimeout {
			return authz.Invalidation{}, false
		}
		if err != nil {
			t.Fatal(err)
		}
		var inv authz.Invalidation
		if err := json.Unmarshal(m.Data, &inv); err != nil {
			t.Fatal(err)
		}
		return inv, true
	}

	// The first change is published at once.
	p.Changed("roles/a")
	if inv, ok := next(t, due); !ok || inv.Reason != "roles/a" {
		t.Fatalf("first change: got %+v, %v", inv, ok)
	}
	// A burst right after waits for MinInterval and is one publish
	// carrying the latest reason.
	for _, r := range []string{"roles/b", "roles/c", "roles/d"} {
		p.Changed(r)
	}
	if inv, ok := next(t, quiet); ok {
		t.Fatalf("published %+v before MinInterval passed", inv)
	}
	if !clk.HasWaiters() {
		t.Fatal("publisher is not waiting for MinInterval")
	}
	clk.Step(MinInterval)
	if inv, ok := next(t, due); !ok || inv.Reason != "roles/d" {
		t.Fatalf("burst: got %+v, %v", inv, ok)
	}
	if inv, ok := next(t, quiet); ok {
		t.Fatalf("burst published twice: %+v", inv)
	}
	// After a quiet MinInterval a change is published at once again.
	clk.Step(MinInterval)
	p.Changed("roles/e")
	if inv, ok := next(t, due); !ok || inv.Reason != "roles/e" {
		t.Fatalf("after quiet: got %+v, %v", inv, ok)
	}
}
