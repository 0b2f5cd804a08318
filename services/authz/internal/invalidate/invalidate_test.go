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
	srv := natstest.Start(t)
	sub, err := srv.Connect(t).SubscribeSync(authz.SubjectInvalidate)
	if err != nil {
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
	next := func(t *testing.T) (authz.Invalidation, bool) {
		t.Helper()
		m, err := sub.NextMsg(200 * time.Millisecond)
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
	if inv, ok := next(t); !ok || inv.Reason != "roles/a" {
		t.Fatalf("first change: got %+v, %v", inv, ok)
	}
	// A burst right after waits for MinInterval and is one publish
	// carrying the latest reason.
	for _, r := range []string{"roles/b", "roles/c", "roles/d"} {
		p.Changed(r)
	}
	if inv, ok := next(t); ok {
		t.Fatalf("published %+v before MinInterval passed", inv)
	}
	if !clk.HasWaiters() {
		t.Fatal("publisher is not waiting for MinInterval")
	}
	clk.Step(MinInterval)
	if inv, ok := next(t); !ok || inv.Reason != "roles/d" {
		t.Fatalf("burst: got %+v, %v", inv, ok)
	}
	if inv, ok := next(t); ok {
		t.Fatalf("burst published twice: %+v", inv)
	}
	// After a quiet MinInterval a change is published at once again.
	clk.Step(MinInterval)
	p.Changed("roles/e")
	if inv, ok := next(t); !ok || inv.Reason != "roles/e" {
		t.Fatalf("after quiet: got %+v, %v", inv, ok)
	}
}
