package natstest_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"kplane.dev/libs/natstest"
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
