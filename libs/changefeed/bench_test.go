package changefeed_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kplane.dev/libs/changefeed"
	proto "kplane.dev/proto/changefeed"
)

// BenchmarkEndToEnd measures changes per second from etcd writes (by
// several writers at once) to their receipt by a consumer.
func BenchmarkEndToEnd(b *testing.B) {
	const writers = 16
	f := newFixture(b)
	f.runPublisher(b)
	var received atomic.Int64
	from := f.revision(b)
	runUntilStopped(b, func(ctx context.Context) error {
		return changefeed.Subscribe(ctx, f.js, proto.StreamSubjects, from, func(context.Context, proto.Event) error {
			received.Add(1)
			return nil
		})
	})
	value := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"%d","namespace":"ns"},"data":{"key":"a value of a few dozen bytes, like a small config"}}`
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := w; i < b.N; i += writers {
				if _, err := f.etcd.Put(context.Background(), f.keys.Object("ns", fmt.Sprint(i)), fmt.Sprintf(value, i)); err != nil {
					b.Errorf("put %d: %v", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(wait)
	for received.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("consumer received %d of %d changes", received.Load(), b.N)
		}
		time.Sleep(time.Millisecond)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "changes/s")
}
