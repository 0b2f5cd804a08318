package natsrpc_test

import (
	"context"
	"testing"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
)

// BenchmarkRoundTrip is one request answered at once: what the protocol
// (own inbox, acknowledgement, headers) costs a review that does nothing.
func BenchmarkRoundTrip(b *testing.B) {
	srv := natstest.Start(b)
	nc := srv.Connect(b)
	s := natsrpc.NewServer(nc, discard)
	if err := s.Handle("bench.echo", "q", func(_ context.Context, p []byte) ([]byte, error) { return p, nil }); err != nil {
		b.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		b.Fatal(err)
	}
	client := srv.Connect(b)
	payload := []byte(`{"spec":{"token":"x"}}`)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := natsrpc.Request(context.Background(), client, "bench.echo", payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
