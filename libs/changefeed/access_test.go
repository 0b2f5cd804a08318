package changefeed_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"kplane.dev/libs/natstest"
	"kplane.dev/proto/access"
	proto "kplane.dev/proto/changefeed"
)

// TestPublisherWithCoreRights runs the publisher on core's NATS identity,
// as core runs it: it creates the stream, publishes, and after a restart
// resumes from the stream's last message, all within core's permissions.
func TestPublisherWithCoreRights(t *testing.T) {
	f := newFixture(t)
	js, err := jetstream.New(natstest.StartWithAccess(t).ConnectAs(t, access.Core))
	if err != nil {
		t.Fatal(err)
	}
	f.js = js
	ctx := context.Background()
	// messages waits until the stream holds at least n messages: core may
	// read the stream's state, not consume it.
	messages := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(wait)
		for {
			var have uint64
			if s, err := js.Stream(ctx, proto.StreamName); err == nil {
				if info, err := s.Info(ctx); err == nil {
					have = info.State.Msgs
				}
			}
			if have >= n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stream holds %d messages, want %d", have, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	f.create(t, "a")
	stop := f.runPublisher(t)
	messages(2) // the resync marker and a
	stop()
	f.create(t, "b")
	f.runPublisher(t)
	messages(3)
}
