package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"kplane.dev/libs/healthz"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/serving"
	authnproto "kplane.dev/proto/authn"
	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/bootstrap"
	authncache "kplane.dev/services/authn/internal/authenticator/cache"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
	saiformers "kplane.dev/services/authn/internal/authenticator/serviceaccount/informers"
)

// Server is a running authn replica.
type Server struct {
	cfg     *Config
	log     *slog.Logger
	clock   clock.PassiveClock
	ln      net.Listener
	http    *http.Server
	metrics *authnMetrics
	// reviews is what the reviews answered over NATS report to.
	reviews *natsrpc.Observer

	// reviewer answers TokenReviews: the token authenticators' union
	// behind the cache, the bearer rules and the group adder.
	reviewer authenticator.Authenticator
	// factory and getter are nil when nothing reads the API.
	factory informers.SharedInformerFactory
	getter  *saiformers.Getter

	discovery, jwks []byte
	nc              atomic.Pointer[nats.Conn]
	// rpc answers the reviews on nc.
	rpc      atomic.Pointer[natsrpc.Server]
	shutdown *serving.Shutdown
}

// New builds a Server from cfg and listens on its address.
func New(cfg *Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.log, clock: clock.RealClock{}}
	if cfg.api != nil {
		client, err := kubernetes.NewForConfig(cfg.api)
		if err != nil {
			return nil, fmt.Errorf("API client: %w", err)
		}
		s.factory = informers.NewSharedInformerFactory(client, 0)
		s.getter = saiformers.New(client, s.factory)
	}
	reg, err := metrics.NewRegistry()
	if err != nil {
		return nil, err
	}
	if s.metrics, err = newMetrics(reg); err != nil {
		return nil, err
	}
	if s.reviewer, err = s.buildReviewer(); err != nil {
		return nil, err
	}
	if s.discovery, s.jwks, err = issuerDocuments(cfg.issuers[0], cfg.publicKeys); err != nil {
		return nil, err
	}
	if s.reviews, err = natsrpc.NewObserver(cfg.serving.Tracing, reg); err != nil {
		return nil, err
	}
	s.shutdown = cfg.serving.NewShutdown(s.drainNATS)
	s.http = cfg.serving.NewServer(s.handler(metrics.Handler(reg, cfg.serving.ClientCA, s.log)))
	if s.ln, err = cfg.serving.Listen(); err != nil {
		return nil, err
	}
	return s, nil
}

// buildReviewer assembles kube's token authenticator chain, in kube's order.
func (s *Server) buildReviewer() (authenticator.Authenticator, error) {
	cfg := s.cfg
	var tokens []authenticator.Authenticator
	if cfg.tokenFile != nil {
		tokens = append(tokens, authenticator.AudienceAgnostic(cfg.apiAuds, cfg.tokenFile))
	}
	// Service account tokens are checked against their service account,
	// so they need the API; bound tokens are in kube too, whatever
	// --service-account-lookup says.
	if s.getter != nil {
		legacy, err := serviceaccount.NewLegacyAuthenticator(cfg.keys, cfg.apiAuds, s.getter)
		if err != nil {
			return nil, err
		}
		bound, err := serviceaccount.NewAuthenticator(cfg.issuers, cfg.keys, cfg.apiAuds, s.getter)
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, legacy, bound)
	}
	if s.getter != nil && cfg.bootstrap {
		tokens = append(tokens, authenticator.AudienceAgnostic(cfg.apiAuds,
			bootstrap.New(s.getter.BootstrapSecrets(), bootstrap.WithLogger(s.log))))
	}
	if cfg.oidc != nil {
		tokens = append(tokens, authenticator.AudienceAgnostic(cfg.apiAuds, cfg.oidc))
	}
	if cfg.webhook != nil {
		// kube caches the webhook's answers, refusals too, for its own
		// TTL, but not its errors: a webhook that was down is asked again.
		wh, err := authncache.New(cfg.webhook, authncache.WithSuccessTTL(cfg.webhookTTL),
			authncache.WithFailureTTL(cfg.webhookTTL), authncache.WithCacheErrors(false))
		if err != nil {
			return nil, err
		}
		tokens = append(tokens, wh)
	}
	cached, err := authncache.New(authenticator.Union(tokens...),
		authncache.WithSuccessTTL(cfg.successTTL), authncache.WithFailureTTL(cfg.failureTTL), authncache.WithMetrics(s.metrics.tokenCache))
	if err != nil {
		return nil, err
	}
	return authenticator.Bearer(cached, false), nil
}

// Addr is where the HTTPS server listens.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run serves until ctx ends, then shuts down in order: readiness fails,
// serving goes on for the shutdown delay, NATS drains, HTTPS requests in
// flight finish. It returns an error when serving or shutting down
// failed.
func (s *Server) Run(ctx context.Context) error {
	nc, err := s.cfg.nats.Connect("kplane-authn")
	if err != nil {
		_ = s.ln.Close()
		return err
	}
	s.nc.Store(nc)
	defer nc.Close()
	rpc := natsrpc.NewServer(nc, s.log, natsrpc.WithObserver(s.reviews))
	s.rpc.Store(rpc)

	stopInformers := make(chan struct{})
	if s.factory != nil {
		s.factory.Start(stopInformers)
	}
	defer func() {
		close(stopInformers)
		if s.factory != nil {
			s.factory.Shutdown()
		}
	}()

	subscribed := make(chan struct{})
	go func() {
		defer close(subscribed)
		s.subscribe(ctx, rpc)
	}()
	defer func() { <-subscribed }()

	return errors.Join(serving.Serve(ctx, s.http, s.ln, s.log, s.shutdown.Run), s.cfg.serving.Tracing.Shutdown(ctx))
}

// subscribe joins the queue group once the informers have synced: a
// replica answering from empty caches would refuse good bootstrap tokens
// (read from the cache alone), so until then the other replicas answer.
// Health endpoints serve meanwhile; /readyz says the informers have not
// synced. A subscription made as shutdown drains the connection fails
// and is only logged.
func (s *Server) subscribe(ctx context.Context, rpc *natsrpc.Server) {
	if s.getter != nil && !cache.WaitForCacheSync(ctx.Done(), s.getter.HasSynced) {
		return
	}
	for subject, h := range map[string]natsrpc.Handler{
		authnproto.SubjectTokenReview:     s.serveTokenReview,
		authnproto.SubjectTokenRequest:    s.serveTokenRequest,
		authnproto.SubjectIssuerDiscovery: func(context.Context, []byte) ([]byte, error) { return s.discovery, nil },
		authnproto.SubjectIssuerKeys:      func(context.Context, []byte) ([]byte, error) { return s.jwks, nil },
	} {
		if err := rpc.Handle(subject, authnproto.QueueGroup, h); err != nil {
			s.log.Error("answer reviews", "subject", subject, "err", err)
		}
	}
}

// drainNATS lets the replies in flight go out while NATS sends new
// requests to the other replicas.
func (s *Server) drainNATS(ctx context.Context) {
	if rpc := s.rpc.Load(); rpc != nil {
		if err := rpc.Drain(ctx); err != nil {
			s.log.Warn("drain reviews", "err", err)
		}
	}
	nc := s.nc.Load()
	if err := nc.Drain(); err != nil {
		s.log.Warn("drain nats", "err", err)
	}
	for nc.IsDraining() && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
}

// checks are what a replica needs to answer: NATS, and full informer
// caches (a review against an empty cache would refuse good tokens of
// bootstrap secrets, the only kind read from the cache alone).
func (s *Server) checks() []healthz.Checker {
	return []healthz.Checker{
		healthz.NamedCheck("nats", func(*http.Request) error {
			if nc := s.nc.Load(); nc == nil || !nc.IsConnected() {
				return errors.New("not connected to NATS")
			}
			return nil
		}),
		healthz.NamedCheck("informer-sync", func(*http.Request) error {
			if s.getter != nil && !s.getter.HasSynced() {
				return errors.New("informers have not synced")
			}
			return nil
		}),
	}
}

func (s *Server) handler(metricsHandler http.Handler) http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	live := []healthz.Checker{healthz.Ping(), healthz.Log()}
	healthy := append(append([]healthz.Checker{}, live...), s.checks()...)
	ready := append(append([]healthz.Checker{}, healthy...), s.shutdown.Check())
	for name, checks := range map[string][]healthz.Checker{"healthz": healthy, "livez": live, "readyz": ready} {
		h := echo.WrapHandler(healthz.Handler(name, checks...))
		e.GET("/"+name, h)
		e.GET("/"+name+"/*", h)
	}
	e.GET("/metrics", echo.WrapHandler(metricsHandler))
	if h := s.cfg.serving.InternalProfiles(); h != nil {
		profiling.RegisterEcho(e, h)
	}
	e.POST(tokenReviewPath, s.httpTokenReview)
	return e
}
