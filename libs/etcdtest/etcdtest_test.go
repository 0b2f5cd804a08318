package etcdtest_test

import (
	"context"
	"testing"

	"kplane.dev/libs/etcdtest"
)

func TestStartServesReadsAndWrites(t *testing.T) {
	c := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	if _, err := c.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	resp, err := c.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get /k = %v, want v", resp.Kvs)
	}
}

func TestRestartKeepsDataAndAddress(t *testing.T) {
	srv := etcdtest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	if _, err := c.Put(ctx, "/k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	srv.Restart(t)
	resp, err := c.Get(ctx, "/k")
	if err != nil {
		t.Fatalf("get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("get /k after restart = %v, want v", resp.Kvs)
	}
	srv.Stop()
	srv.Stop()
}
