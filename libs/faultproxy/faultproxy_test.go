package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"kplane.dev/libs/faultproxy"
)

// echoServer answers each line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, msg string) error {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg + "\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != msg+"\n" {
		t.Fatalf("echo = %q, want %q", line, msg)
	}
	return nil
}

func TestCutDropsLiveConnectionsAndRestoreLetsNewOnesThrough(t *testing.T) {
	p := faultproxy.Start(t, echoServer(t))
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(t, c, "before"); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Cut()
	if err := roundTrip(t, c, "during"); err == nil {
		t.Fatal("a connection survived Cut")
	}
	held, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	p.Restore()
	if err := roundTrip(t, held, "after"); err != nil {
		t.Fatalf("connection made during the cut, after Restore: %v", err)
	}
}
