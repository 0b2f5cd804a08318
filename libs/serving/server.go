package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"kplane.dev/libs/healthz"
)

// Listen listens on the configured address.
func (c *Config) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", c.ListenAddress)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", c.ListenAddress, err)
	}
	return ln, nil
}

// IdleTimeout is how long a server of NewServer keeps a connection that
// has no request, as kube-apiserver does. A client that keeps
// connections to kplane's services must drop its idle ones sooner: one
// that waits as long may send a request on a connection the server is
// closing at that moment, which fails a write it cannot send again.
const IdleTimeout = 90 * time.Second

// NewServer is the HTTPS server of handler: TLS 1.2 or later with the
// serving certificate, and a client certificate asked for but neither
// required nor verified. The handlers verify it, as kube does, so that a
// wrong one is a 401 rather than a failed handshake, and clients without
// one (probes, token bearers) still get in. The handshake names the
// client CA, so that a client with several certificates picks the one it
// verifies. A service sets what it needs beyond that on the result
// before serving it.
func (c *Config) NewServer(handler http.Handler) *http.Server {
	return &http.Server{
		Handler: handler,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{c.Certificate},
			ClientAuth:   tls.RequestClientCert,
			ClientCAs:    c.ClientCA,
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       IdleTimeout,
		// Handshake failures of probes and scanners are noise, not
		// warnings.
		ErrorLog: slog.NewLogLogger(c.Log.Handler(), slog.LevelDebug),
	}
}

// Shutdown stops a server as kube-apiserver does: readiness fails,
// serving goes on for Delay so that load balancers see the server unready
// before its listener closes, Drain runs, then the server stops accepting
// and waits up to Timeout for the requests in flight.
type Shutdown struct {
	Delay   time.Duration
	Timeout time.Duration
	// Drain, when set, ends what would hold requests in flight past the
	// timeout (watches), or finishes what the end of the server would cut
	// short (NATS replies); its context ends at the timeout.
	Drain func(ctx context.Context)
	Log   *slog.Logger

	begun atomic.Bool
}

// NewShutdown is the shutdown c configures, with drain as its Drain.
func (c *Config) NewShutdown(drain func(ctx context.Context)) *Shutdown {
	return &Shutdown{Delay: c.ShutdownDelay, Timeout: c.ShutdownTimeout, Drain: drain, Log: c.Log}
}

// Check is kube's "shutdown" readiness check: it fails once shutdown has
// begun.
func (s *Shutdown) Check() healthz.Checker {
	return healthz.NamedCheck("shutdown", func(*http.Request) error {
		if s.begun.Load() {
			return errors.New("server is shutting down")
		}
		return nil
	})
}

// Run shuts srv down. It ignores the end of ctx, which is usually what
// started it, and returns an error when requests were still in flight at
// the timeout.
func (s *Shutdown) Run(ctx context.Context, srv *http.Server) error {
	ctx = context.WithoutCancel(ctx)
	s.begun.Store(true)
	if s.Delay > 0 {
		s.Log.Info("serving unready until the shutdown delay passes", "delay", s.Delay)
		time.Sleep(s.Delay)
	}
	ctx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()
	if s.Drain != nil {
		s.Drain(ctx)
	}
	if err := srv.Shutdown(ctx); err != nil {
		return fmt.Errorf("requests still in flight at the shutdown timeout: %w", err)
	}
	return nil
}

// Serve serves srv on ln until ctx ends or serving fails. When ctx ends,
// shutdown (Shutdown.Run, or a service's own sequence) stops srv
// gracefully, and srv is closed if that fails. It returns why serving or
// shutting down failed.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, log *slog.Logger, shutdown func(context.Context, *http.Server) error) error {
	served := make(chan error, 1)
	go func() { served <- srv.ServeTLS(ln, "", "") }()
	log.Info("serving", "address", ln.Addr().String())
	select {
	case err := <-served:
		return errors.Join(fmt.Errorf("serve HTTPS: %w", err), srv.Close())
	case <-ctx.Done():
	}
	log.Info("shutting down")
	err := shutdown(ctx, srv)
	if err != nil {
		err = errors.Join(fmt.Errorf("shut down: %w", err), srv.Close())
	}
	// Shutdown and Close make ServeTLS return at once.
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("serve HTTPS: %w", serveErr))
	}
	return err
}
