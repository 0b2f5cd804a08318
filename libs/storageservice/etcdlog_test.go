package storageservice

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdClientErrorsAreLogged: a request to an etcd that does not answer
// leaves a warning in the service's log, where before the client's
// logger discarded it.
func TestEtcdClientErrorsAreLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&out, nil))
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + dead}, DialTimeout: time.Second, Logger: etcdLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := c.Get(ctx, "/k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get from a dead etcd: %v", err)
	}
	logged := out.String()
	for _, want := range []string{`"level":"WARN"`, `"component":"etcd-client"`, `"msg":"retrying of unary invoker failed"`, `"target":`} {
		if !strings.Contains(logged, want) {
			t.Errorf("log lacks %s:\n%s", want, logged)
		}
	}
}

// TestEtcdLoggerDropsChatter: below warn nothing reaches the service's
// log.
func TestEtcdLoggerDropsChatter(t *testing.T) {
	var out bytes.Buffer
	l := etcdLogger(slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	l.Info("balancer picked a member")
	l.Debug("keepalive")
	if out.Len() != 0 {
		t.Errorf("logged %q", out.String())
	}
	l.With().Error("lost the member")
	if !strings.Contains(out.String(), "level=ERROR") {
		t.Errorf("an error logged as %q", out.String())
	}
}
