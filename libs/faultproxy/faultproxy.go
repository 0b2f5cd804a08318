package faultproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy forwards every connection on its listener to a target address.
//
// Lock order: mu guards conns and open; it is never held while copying.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	open  bool
	ready *sync.Cond

	wg sync.WaitGroup
}

// Start listens on a free loopback port and forwards to target until the
// test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	return Listen(t, "127.0.0.1:0", target)
}

// UnusedAddr is a loopback address nothing listens on: a free port,
// closed again. Connections to it are refused, as to a server not yet
// started or gone; Listen can start a proxy there later.
func UnusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return addr
}

// Listen is Start on addr: a test can point a client at an address
// before anything listens there, as at a server not yet started.
func Listen(t testing.TB, addr, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]struct{}{}, open: true}
	p.ready = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the address clients dial, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every live connection and holds new ones until Restore.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.open = false
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

// Restore lets held and new connections through again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.open = true
	p.ready.Broadcast()
	p.mu.Unlock()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	p.mu.Lock()
	for !p.open {
		p.ready.Wait()
	}
	closed := p.conns == nil
	p.mu.Unlock()
	if closed {
		_ = client.Close()
		return
	}
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	var copies sync.WaitGroup
	copies.Add(2)
	pipe := func(dst, src net.Conn) {
		defer copies.Done()
		_, _ = io.Copy(dst, src)
		// One direction ending ends both: a half-open proxied connection
		// would hide the cut from the other side.
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(server, client)
	go pipe(client, server)
	copies.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}

func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil || !p.open {
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) close() {
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.open = true
	p.ready.Broadcast()
	p.mu.Unlock()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		panic(err)
	}
	p.wg.Wait()
}
