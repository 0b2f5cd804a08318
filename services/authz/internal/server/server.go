package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"kplane.dev/libs/healthz"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/regopolicy"
	"kplane.dev/libs/serving"
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
	// rpc answers the reviews on NATS once the informers have synced,
	// possibly while shutdown begins (it then refuses to start).
	rpc      *natsrpc.Server
	shutdown *serving.Shutdown
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
	observer, err := natsrpc.NewObserver(cfg.serving.Tracing, cfg.Registry)
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.rpc = natsrpc.NewServer(nc, s.log, natsrpc.WithObserver(observer))
	if err := s.build(); err != nil {
		nc.Close()
		return nil, err
	}
	ln, err := cfg.serving.Listen()
	if err != nil {
		nc.Close()
		return nil, err
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
	policyOpts := []policy.Option{policy.WithLogger(s.log), policy.WithOnChange(publisher.Changed), policy.WithRegisterer(cfg.Registry)}
	if cfg.policyFailOpen {
		policyOpts = append(policyOpts, policy.WithFailOpen())
	}
	if s.policies, err = policy.New(context.Background(), s.feed, policyOpts...); err != nil {
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
	s.shutdown = cfg.serving.NewShutdown(s.drain)
	// The webhook handler verifies client certificates.
	s.http = cfg.serving.NewServer(s.handler())
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
				dir := regopolicy.NewDir(s.policies, s.cfg.policyDir, s.log)
				if err := dir.Load(context.Background()); err != nil {
					return nil, fmt.Errorf("load --authorization-policy-dir: %w", err)
				}
				s.tasks = append(s.tasks, task{name: "policy directory", run: func(ctx context.Context) error {
					return dir.Run(ctx, regopolicy.PollInterval)
				}})
			}
		case ModeWebhook:
			m, err := authorizer.NewWebhookMetrics(s.cfg.Registry)
			if err != nil {
				return nil, err
			}
			w, err := authorizer.NewWebhook(s.cfg.webhook, authorizer.WithCacheTTLs(s.cfg.webhookTTLs[0], s.cfg.webhookTTLs[1]), authorizer.WithWebhookMetrics(m))
			if err != nil {
				return nil, err
			}
			chain = append(chain, w.Mode())
		default:
			return nil, fmt.Errorf("unknown authorization mode %q", m)
		}
	}
	decisions, err := authorizer.NewDecisionMetrics(s.cfg.Registry)
	if err != nil {
		return nil, err
	}
	for i := range chain {
		chain[i] = decisions.Instrument(chain[i])
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
	for endpoint, checks := range map[string][]healthz.Checker{
		"healthz": {ping, healthz.Log(), informers, natsCheck},
		"livez":   {ping, healthz.Log()},
		"readyz":  {ping, healthz.Log(), informers, natsCheck, s.shutdown.Check()},
	} {
		h := echo.WrapHandler(healthz.Handler(endpoint, checks...))
		e.GET("/"+endpoint, h)
		e.GET("/"+endpoint+"/*", h)
	}
	e.GET(metrics.Path, echo.WrapHandler(metrics.Handler(s.cfg.Registry, s.cfg.serving.ClientCA, s.log)))
	if h := s.cfg.serving.InternalProfiles(); h != nil {
		profiling.RegisterEcho(e, h)
	}
	return e
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx ends, then shuts down in order: readiness fails,
// serving goes on for the shutdown delay, the NATS subscriptions drain,
// HTTPS requests in flight finish, background work stops, NATS closes.
// It returns an error when serving or shutting down failed.
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

	work.Go(func() { s.subscribe(workCtx) })
	s.log.Info("authorizing", "modes", s.cfg.modes)
	return errors.Join(serving.Serve(ctx, s.http, s.ln, s.log, s.shutdown.Run), s.cfg.serving.Tracing.Shutdown(ctx))
}

// subscribe joins the reviews' queue group once the informers have
// synced: a replica that answered from empty caches would refuse what
// RBAC allows (a restarted replica would make requests fail under load),
// so until then the other replicas answer. Health endpoints serve
// meanwhile; /readyz says the informers have not synced.
func (s *Server) subscribe(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), s.feed.HasSynced) {
		return
	}
	for subject, h := range map[string]natsrpc.Handler{
		authz.SubjectAccessReview: s.reviews.accessReview,
		authz.SubjectRulesReview:  s.reviews.rulesReview,
	} {
		if err := s.rpc.Handle(subject, authz.QueueGroup, h); err != nil {
			s.log.Error("answer reviews", "subject", subject, "err", err)
			return
		}
	}
	s.log.Info("answering reviews")
}

// drain lets the reviews delivered before shutdown finish and their
// replies go out, while NATS sends new ones to the other replicas; then it
// waits for the reviews served over HTTP.
func (s *Server) drain(ctx context.Context) {
	if err := s.rpc.Drain(ctx); err != nil {
		s.log.Warn("drain reviews", "err", err)
	}
	s.reviews.inflight.wait(ctx)
}
