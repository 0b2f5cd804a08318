package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds the wait for the server to accept connections.
const readyTimeout = 30 * time.Second

// Server is a running embedded NATS server with JetStream.
type Server struct {
	// URL is the client URL, such as nats://127.0.0.1:41234.
	URL string
	srv *server.Server
}

// Option changes the server's options before it starts.
type Option func(*server.Options)

// Start runs a NATS server with JetStream until the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	o := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT, // 0 would mean the default 4222
		NoLog:     true,
		NoSigs:    true,
		JetStream: true,
		StoreDir:  t.TempDir(),
	}
	for _, opt := range opts {
		opt(o)
	}
	srv, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("create embedded nats server: %v", err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(readyTimeout) {
		t.Fatalf("embedded nats server not ready after %v", readyTimeout)
	}
	return &Server{URL: srv.ClientURL(), srv: srv}
}

// Connect returns a connection to the server, closed when the test ends.
func (s *Server) Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.URL, nats.Name(t.Name()))
	if err != nil {
		t.Fatalf("connect to embedded nats server: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on a connection of its own, closed
// when the test ends.
func (s *Server) JetStream(t testing.TB) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(s.Connect(t))
	if err != nil {
		t.Fatalf("open jetstream: %v", err)
	}
	return js
}
