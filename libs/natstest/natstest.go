package natstest

import (
	"crypto/rand"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"kplane.dev/libs/natsauth"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/access"
)

// readyTimeout bounds the wait for the server to accept connections.
const readyTimeout = 30 * time.Second

// Server is a running embedded NATS server with JetStream.
type Server struct {
	// URL is the client URL, such as nats://127.0.0.1:41234.
	URL string
	srv *server.Server
	// creds, for a server started by StartWithAccess, are the services'
	// credentials, and observer the password of the test's own user.
	creds    *natsauth.Files
	observer string
}

// observerUser is the user a test connects as on a server started by
// StartWithAccess when it connects as no service: it may do anything, as
// an operator's tools may.
const observerUser = "natstest-observer"

// Option changes the server's options before it starts.
type Option func(*server.Options)

// Start runs a NATS server with JetStream, open to every client, until
// the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	return start(t, &server.Options{}, opts)
}

// StartWithAccess runs a NATS server with JetStream that admits kplane's
// services, each with its own NKey and the permissions of
// kplane.dev/proto/access, from a configuration generated as the launcher
// generates it; ConnectAs and ConnOptions connect as one of them. Connect
// and JetStream connect as a user of the test's own that may do anything,
// to observe what the services do.
func StartWithAccess(t testing.TB, opts ...Option) *Server {
	t.Helper()
	files, err := natsauth.Ensure(filepath.Join(t.TempDir(), "auth"), access.Services())
	if err != nil {
		t.Fatalf("generate NATS credentials: %v", err)
	}
	o, err := server.ProcessConfigFile(files.Config())
	if err != nil {
		t.Fatalf("load NATS configuration %s: %v", files.Config(), err)
	}
	password := rand.Text()
	o.Users = append(o.Users, &server.User{Username: observerUser, Password: password})
	s := start(t, o, opts)
	s.creds, s.observer = &files, password
	return s
}

func start(t testing.TB, o *server.Options, opts []Option) *Server {
	t.Helper()
	o.Host = "127.0.0.1"
	o.Port = server.RANDOM_PORT // 0 would mean the default 4222
	o.NoLog, o.NoSigs = true, true
	o.JetStream, o.StoreDir = true, t.TempDir()
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
	opts := []nats.Option{nats.Name(t.Name())}
	if s.observer != "" {
		opts = append(opts, nats.UserInfo(observerUser, s.observer))
	}
	nc, err := nats.Connect(s.URL, opts...)
	if err != nil {
		t.Fatalf("connect to embedded nats server: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ConnOptions are the flags that connect the service called name (an
// access.Services name) to a server started by StartWithAccess.
func (s *Server) ConnOptions(name string) natsrpc.ConnOptions {
	if s.creds == nil {
		return natsrpc.ConnOptions{URL: s.URL}
	}
	return natsrpc.ConnOptions{URL: s.URL, NKeyFile: s.creds.Seed(name)}
}

// ConnectAs returns a connection made as the service called name makes
// it, closed when the test ends; it fails the test unless the server
// admits it at once. extra options are applied last.
func (s *Server) ConnectAs(t testing.TB, name string, extra ...nats.Option) *nats.Conn {
	t.Helper()
	svc, ok := access.Lookup(name)
	if !ok {
		t.Fatalf("no service %q in kplane.dev/proto/access", name)
	}
	o := s.ConnOptions(name)
	nc, err := o.Connect(svc.ClientName(), append([]nats.Option{nats.RetryOnFailedConnect(false)}, extra...)...)
	if err != nil {
		t.Fatalf("connect to embedded nats server as %s: %v", name, err)
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
