package changefeed_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"kplane.dev/libs/changefeed"
	proto "kplane.dev/proto/changefeed"
)

// BenchmarkEndToEnd measures changes per second from etcd writes (by
// several writers at once) to their receipt by a consumer, and the CPU
// each change costs this process, which runs etcd, NATS, the publisher
// and the consumer: with and without the publisher's linger, which
// gathers concurrent changes into one burst of publishes.
func BenchmarkEndToEnd(b *testing.B) {
	b.Run("linger=0", func(b *testing.B) { benchmarkEndToEnd(b, changefeed.WithLinger(0)) })
	b.Run("linger=default", func(b *testing.B) { benchmarkEndToEnd(b) })
}

func benchmarkEndToEnd(b *testing.B, opts ...changefeed.Option) {
	const writers = 16
	f := newFixture(b)
	f.runPublisher(b, opts...)
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
	cpuStart := cpuTime(b)
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
	b.ReportMetric(float64((cpuTime(b)-cpuStart).Microseconds())/float64(b.N), "cpu-µs/change")
}

// cpuTime is the CPU this process has used, user and system.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
