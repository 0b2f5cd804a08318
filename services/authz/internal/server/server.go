package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/healthz"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/authz"
	"kplane.dev/services/authz/internal/authorizer"
	"kplane.dev/services/authz/internal/feed"
	"kplane.dev/services/authz/internal/invalidate"
	"kplane.dev/services/authz/internal/policy"
	"kplane.dev/services/authz/internal/rbac"
)

// WebhookPath is kube's path of the SubjectAccessReview webhook.
const WebhookPath = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

// task is background work that runs as long as the server.
type task struct {
	name string
	run  func(ctx context.Context) error
}

// Server is one replica of the authz service.
type Server struct {
	cfg  *Config
	log  *slog.Logger
	nats *nats.Conn
	ln   net.Listener
	http *http.Server

	reviews  *reviewer
	feed     *feed.Feed
	policies *policy.Authorizer
	tasks    []task

	shuttingDown atomic.Bool
}

// New builds a replica from cfg: it connects to NATS (in the background:
// NATS may start later), builds the mode chain and the informers, and
// listens on the configured address. A Server that New returned must be
// Run.
func New(cfg *Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.log}
	nc, err := cfg.nats.Connect("kplane-authz")
	if err != nil {
		return nil, err
	}
	s.nats = nc
	if err := s.build(); err != nil {
		nc.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.listenAddress)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("listen on %s: %w", cfg.listenAddress, err)
	}
	s.ln = ln
	return s, nil
}

func (s *Server) build() error {
	cfg := s.cfg
	client, err := kubernetes.NewForConfig(cfg.api)
	if err != nil {
		return fmt.Errorf("build API client: %w", err)
	}
	publisher := invalidate.New(s.nats, invalidate.WithLogger(s.log))
	s.tasks = append(s.tasks, task{name: "invalidations", run: publisher.Run})

	index := rbac.NewIndex()
	s.feed = feed.New(client, index, cfg.policyNamespace, publisher.Changed, s.log)
	if s.policies, err = policy.New(context.Background(), s.feed,
		policy.WithLogger(s.log), policy.WithOnChange(publisher.Changed), policy.WithRegisterer(cfg.Registry)); err != nil {
		return err
	}
	s.tasks = append(s.tasks, task{name: "informers", run: func(ctx context.Context) error { return s.feed.Run(ctx, s.policies) }})

	chain, err := s.chain(index)
	if err != nil {
		return err
	}
	if s.reviews, err = newReviewer(chain, cfg.Registry); err != nil {
		return err
	}
	if err := cfg.Registry.Register(prometheus.NewGoCollector()); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	s.http = &http.Server{
		Handler: s.handler(),
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cfg.serving},
			// The webhook handler verifies the certificate, so that a
			// wrong one is a 401 rather than a failed handshake and probes
			// without one still reach the health checks.
			ClientAuth: tls.RequestClientCert,
		},
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       90 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	return nil
}

// chain builds the modes in the order of --authorization-mode.
func (s *Server) chain(index *rbac.Index) (authorizer.Chain, error) {
	var chain authorizer.Chain
	for _, m := range s.cfg.modes {
		switch m {
		case ModeAlwaysAllow:
			chain = append(chain, authorizer.AlwaysAllow())
		case ModeAlwaysDeny:
			chain = append(chain, authorizer.AlwaysDeny())
		case ModeRBAC:
			a, err := rbac.NewAuthorizer(context.Background(), index)
			if err != nil {
				return nil, err
			}
			chain = append(chain, authorizer.RBAC(a, index))
		case ModeRego:
			chain = append(chain, s.policies.Mode())
			if s.cfg.policyDir != "" {
				dir := policy.NewDir(s.policies, s.cfg.policyDir)
				if err := dir.Load(context.Background()); err != nil {
					return nil, fmt.Errorf("load --authorization-policy-dir: %w", err)
				}
				s.tasks = append(s.tasks, task{name: "policy directory", run: func(ctx context.Context) error {
					return dir.Run(ctx, policy.PollInterval)
				}})
			}
		case ModeWebhook:
			w, err := authorizer.NewWebhook(s.cfg.webhook, authorizer.WithCacheTTLs(s.cfg.webhookTTLs[0], s.cfg.webhookTTLs[1]))
			if err != nil {
				return nil, err
			}
			chain = append(chain, w.Mode())
		default:
			return nil, fmt.Errorf("unknown authorization mode %q", m)
		}
	}
	return chain, nil
}

// handler serves the webhook, health and metrics.
func (s *Server) handler() http.Handler {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.POST(WebhookPath, s.serveWebhook)

	ping := healthz.Ping()
	informers := healthz.NamedCheck("informer-sync", func(*http.Request) error {
		if !s.feed.HasSynced() {
			return errors.New("informers not yet synced")
		}
		return nil
	})
	natsCheck := healthz.NamedCheck("nats", func(*http.Request) error {
		if !s.nats.IsConnected() {
			return fmt.Errorf("NATS is %v", s.nats.Status())
		}
		return nil
	})
	shutdown := healthz.NamedCheck("shutdown", func(*http.Request) error {
		if s.shuttingDown.Load() {
			return errors.New("server is shutting down")
		}
		return nil
	})
	for endpoint, checks := range map[string][]healthz.Checker{
		"healthz": {ping, healthz.Log(), informers, natsCheck},
		"livez":   {ping, healthz.Log()},
		"readyz":  {ping, healthz.Log(), informers, natsCheck, shutdown},
	} {
		h := echo.WrapHandler(healthz.Handler(endpoint, checks...))
		e.GET("/"+endpoint, h)
		e.GET("/"+endpoint+"/*", h)
	}
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
	return e
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx ends, then shuts down in order: readiness fails,
// serving goes on for the shutdown delay, the NATS subscriptions drain,
// HTTPS requests in flight finish, background work stops, NATS closes.
func (s *Server) Run(ctx context.Context) error {
	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var work sync.WaitGroup
	for _, t := range s.tasks {
		work.Go(func() {
			if err := t.run(workCtx); err != nil && workCtx.Err() == nil {
				s.log.Error("background work ended", "task", t.name, "err", err)
			}
		})
	}
	defer func() {
		stopWork()
		work.Wait()
		s.nats.Close()
	}()

	var subs []*nats.Subscription
	for subject, h := range map[string]natsrpc.Handler{
		authz.SubjectAccessReview: s.reviews.accessReview,
		authz.SubjectRulesReview:  s.reviews.rulesReview,
	} {
		sub, err := natsrpc.Serve(s.nats, subject, authz.QueueGroup, s.log, h)
		if err != nil {
			_ = s.ln.Close()
			return err
		}
		subs = append(subs, sub)
	}

	serveDone := make(chan error, 1)
	go func() { serveDone <- s.http.ServeTLS(s.ln, "", "") }()
	s.log.Info("serving", "address", s.ln.Addr().String(), "modes", s.cfg.modes)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-serveDone:
		serveErr = fmt.Errorf("serve HTTPS: %w", serveErr)
	}
	s.log.Info("shutting down")
	s.shuttingDown.Store(true)
	if serveErr == nil && s.cfg.shutdownDelay > 0 {
		s.log.Info("serving unready until the shutdown delay passes", "delay", s.cfg.shutdownDelay)
		time.Sleep(s.cfg.shutdownDelay)
	}
	for _, sub := range subs {
		// Drain stops new deliveries to this replica (the queue group
		// sends them to the others) and lets the ones delivered finish.
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			s.log.Warn("drain subscription", "subject", sub.Subject, "err", err)
		}
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.shutdownTimeout)
	defer cancel()
	s.waitDrained(shutdownCtx, subs)
	// Replies of the reviews delivered before the drain are sent before
	// the connection closes.
	s.reviews.inflight.wait(shutdownCtx)
	if err := s.nats.FlushWithContext(shutdownCtx); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		s.log.Warn("flush NATS", "err", err)
	}
	if err := s.http.Shutdown(shutdownCtx); err != nil {
		s.log.Warn("requests still in flight at the shutdown timeout", "err", err)
		_ = s.http.Close()
	}
	if serveErr == nil {
		if err := <-serveDone; !errors.Is(err, http.ErrServerClosed) {
			serveErr = fmt.Errorf("serve HTTPS: %w", err)
		}
	}
	return serveErr
}

// waitDrained waits until the draining subscriptions have handed out every
// message they hold, or ctx ends.
func (s *Server) waitDrained(ctx context.Context, subs []*nats.Subscription) {
	for _, sub := range subs {
		for sub.IsValid() {
			select {
			case <-ctx.Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}
