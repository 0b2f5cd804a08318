package coretest

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"kplane.dev/libs/natsrpc"
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
	nc := c.NATS.Connect(t)
	sub, err := natsrpc.Serve(nc, subject, "coretest", slog.New(slog.DiscardHandler), func(_ context.Context, payload []byte) ([]byte, error) {
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
	t.Cleanup(func() { _ = sub.Unsubscribe() })
}
