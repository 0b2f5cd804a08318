package changefeed_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"

	"kplane.dev/libs/changefeed"
	proto "kplane.dev/proto/changefeed"
)

// A publisher that stopped between two changes of one etcd revision left
// a stream whose last message is part 1 of 3; its successor publishes
// parts 2 and 3 and goes on.
func TestResumesInsideARevision(t *testing.T) {
	f := newFixture(t)
	stop := f.runPublisher(t)
	all := f.subscribe(t, proto.StreamSubjects, 0)
	ctx := context.Background()
	var ops []clientv3.Op
	for _, name := range []string{"x", "y", "z"} {
		ops = append(ops, clientv3.OpPut(f.keys.Object("ns", name), `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`","namespace":"ns"}}`))
	}
	txn, err := f.etcd.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		t.Fatalf("write x, y and z: %v", err)
	}
	all.waitForName(t, "z")
	stop()

	// Copy the stream up to part 1 of the revision into a stream of its
	// own, as the interrupted publisher would have left it.
	const name, root = "CUT", "kplane.cut"
	stream, err := f.js.Stream(ctx, proto.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cut, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{root + ".>"}})
	if err != nil {
		t.Fatalf("create stream %s: %v", name, err)
	}
	for seq := uint64(1); ; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("read message %d: %v", seq, err)
		}
		subject := root + msg.Subject[len(proto.SubjectRoot):]
		if _, err := f.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: msg.Header, Data: msg.Data}); err != nil {
			t.Fatalf("copy message %d: %v", seq, err)
		}
		if msg.Header.Get(proto.HeaderRevisionPart) == "1/3" {
			break
		}
	}
	if info, err := cut.Info(ctx); err != nil || info.State.Msgs != 2 {
		t.Fatalf("stream %s holds %v messages (%v), want the resync marker and part 1", name, info.State.Msgs, err)
	}

	f.runPublisher(t, changefeed.WithStream(name, root))
	c := &collector{}
	runUntilStopped(t, func(ctx context.Context) error {
		return changefeed.Subscribe(ctx, f.js, root+".>", 0, func(_ context.Context, e proto.Event) error {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.events = append(c.events, e)
			return nil
		}, changefeed.FromStream(name, root))
	})
	rvAfter := f.create(t, "after")
	rvXYZ := rv(txn.Header.Revision)
	got := c.waitForName(t, "after")
	want := []brief{
		{proto.Resync, "", got[0].ResourceVersion},
		{proto.Added, "x", rvXYZ},
		{proto.Added, "y", rvXYZ},
		{proto.Added, "z", rvXYZ},
		{proto.Added, "after", rvAfter},
	}
	if diff := cmp.Diff(want, summary(got)); diff != "" {
		t.Errorf("events of the resumed stream (-want +got):\n%s", diff)
	}
}
