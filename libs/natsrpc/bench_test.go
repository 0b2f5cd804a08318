package natsrpc_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
)

// BenchmarkRoundTrip is one request answered at once: what the protocol
// (own inbox, acknowledgement, headers) costs a review that does nothing,
// and what tracing adds to it: none (no Observer), an Observer whose
// sampler samples nothing, and one that samples every request.
func BenchmarkRoundTrip(b *testing.B) {
	for _, bc := range []struct {
		name    string
		sampler sdktrace.Sampler
	}{
		{name: "tracing-off"},
		{name: "sampled-none", sampler: sdktrace.ParentBased(sdktrace.NeverSample())},
		{name: "sampled-all", sampler: sdktrace.ParentBased(sdktrace.AlwaysSample())},
	} {
		b.Run(bc.name, func(b *testing.B) {
			srv := natstest.Start(b)
			nc := srv.Connect(b)
			var reqOpts []natsrpc.RequestOption
			var srvOpts []natsrpc.ServerOption
			if bc.sampler != nil {
				clientObs, _, _ := recordingObserver(b, bc.sampler, prometheus.NewRegistry())
				serverObs, _, _ := recordingObserver(b, bc.sampler, prometheus.NewRegistry())
				reqOpts = append(reqOpts, natsrpc.Observe(clientObs))
				srvOpts = append(srvOpts, natsrpc.WithObserver(serverObs))
			}
			s := natsrpc.NewServer(nc, discard, srvOpts...)
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
					if _, err := natsrpc.Request(context.Background(), client, "bench.echo", payload, reqOpts...); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
