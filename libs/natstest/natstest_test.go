package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"kplane.dev/libs/natstest"
	"kplane.dev/proto/access"
)

func TestJetStreamStoresAndReplays(t *testing.T) {
	js := natstest.Start(t).JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}})
	if err != nil {
		t.Fatalf("create stream: %v", err)
	}
	if _, err := js.Publish(ctx, "t.a", []byte("hello")); err != nil {
		t.Fatalf("publish: %v", err)
	}
	msg, err := stream.GetMsg(ctx, 1)
	if err != nil {
		t.Fatalf("get message 1: %v", err)
	}
	if string(msg.Data) != "hello" || msg.Subject != "t.a" {
		t.Errorf("message 1 = %q on %q, want \"hello\" on t.a", msg.Data, msg.Subject)
	}
}

func TestServersAreIndependent(t *testing.T) {
	a, b := natstest.Start(t), natstest.Start(t)
	if a.URL == b.URL {
		t.Fatalf("two servers share %s", a.URL)
	}
}

// TestStartWithAccess checks that the services' server refuses a client
// without credentials and admits a service and the test's observer.
func TestStartWithAccess(t *testing.T) {
	srv := natstest.StartWithAccess(t)
	if nc, err := nats.Connect(srv.URL); err == nil {
		nc.Close()
		t.Error("a client without credentials connected")
	}
	if !srv.ConnectAs(t, access.Core).IsConnected() {
		t.Error("core is not connected")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := srv.JetStream(t).CreateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}}); err != nil {
		t.Errorf("the observer creates a stream: %v", err)
	}
}
