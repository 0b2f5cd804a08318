package main

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"kplane.dev/libs/natstest"
)

func TestProbeHTTP(t *testing.T) {
	healthy := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy {
			http.Error(w, `{"health":"false"}`, http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := probe(ctx, srv.URL+"/health"); err != nil {
		t.Fatalf("healthy server: %v", err)
	}
	healthy = false
	if err := probe(ctx, srv.URL+"/health"); err == nil {
		t.Fatal("a 503 passed")
	}
}

func TestProbeNATS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv := natstest.Start(t)
	if err := probe(ctx, srv.URL); err != nil {
		t.Fatalf("running NATS: %v", err)
	}
	// A server that accepts and says nothing is not NATS.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n"))
			c.Close()
		}
	}()
	if err := probe(ctx, "nats://"+ln.Addr().String()); err == nil {
		t.Fatal("a server that is not NATS passed")
	}
}
