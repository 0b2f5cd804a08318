package coretest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/access"
)

// Answer stands in for authn or authz on subject of c's NATS until the
// test ends: answer decodes each request into a new In and its result is
// the reply. The real services live in their own modules; core's tests
// need only their contract (proto/authn, proto/authz).
func Answer[In any](t testing.TB, c *Cluster, subject string, answer func(in *In) (any, error)) {
	t.Helper()
	if c.NATS == nil {
		t.Fatal("answer on NATS: the cluster runs without NATS")
	}
	svc, sub, ok := access.ServedBy(subject)
	if !ok {
		t.Fatalf("answer on NATS: no service serves %s in kplane.dev/proto/access", subject)
	}
	// As the service that answers it, so that core's requests meet the
	// permissions they meet in an installation.
	nc := c.NATS.ConnectAs(t, svc.Name)
	s := natsrpc.NewServer(nc, slog.New(slog.DiscardHandler))
	err := s.Handle(subject, sub.Queue, func(_ context.Context, payload []byte) ([]byte, error) {
		in := new(In)
		if err := json.Unmarshal(payload, in); err != nil {
			return nil, err
		}
		out, err := answer(in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Drain(ctx)
	})
}
