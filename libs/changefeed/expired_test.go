package changefeed_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kplane.dev/libs/changefeed"
	proto "kplane.dev/proto/changefeed"
)

// Once the stream's limits dropped its oldest messages, a consumer asking
// for changes from before them is told to list again.
func TestSubscribeFromADroppedRevisionIsExpired(t *testing.T) {
	f := newFixture(t)
	f.runPublisher(t)
	rvA := f.create(t, "a")
	rvB := f.create(t, "b")
	f.subscribe(t, proto.StreamSubjects, 0).waitForName(t, "b")
	ctx := context.Background()
	stream, err := f.js.Stream(ctx, proto.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// Messages 1 and 2 are the resync marker and a.
	for seq := uint64(1); seq <= 2; seq++ {
		if err := stream.DeleteMsg(ctx, seq); err != nil {
			t.Fatalf("delete message %d: %v", seq, err)
		}
	}
	before, err := strconv.ParseInt(rvA, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	err = changefeed.Subscribe(ctx, f.js, proto.StreamSubjects, before-1, func(context.Context, proto.Event) error { return nil })
	if !errors.Is(err, changefeed.ErrExpired) {
		t.Errorf("Subscribe from before the oldest message: %v, want ErrExpired", err)
	}
	// Whether a dropped message followed a's revision is unknown: only
	// from the oldest retained message's revision on is nothing missing.
	if err := changefeed.Subscribe(ctx, f.js, proto.StreamSubjects, before, func(context.Context, proto.Event) error { return nil }); !errors.Is(err, changefeed.ErrExpired) {
		t.Errorf("Subscribe from a's revision: %v, want ErrExpired", err)
	}
	fromB, err := strconv.ParseInt(rvB, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	c := f.subscribe(t, proto.StreamSubjects, fromB)
	rvC := f.create(t, "c")
	want := []brief{{proto.Added, "c", rvC}}
	if diff := cmp.Diff(want, summary(c.waitForName(t, "c"))); diff != "" {
		t.Errorf("events after %s (-want +got):\n%s", rvB, diff)
	}
}
