package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"golang.org/x/net/http2"
	"k8s.io/apimachinery/pkg/runtime/schema"
	restclient "k8s.io/client-go/rest"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/serving"
	"kplane.dev/services/gateway/internal/audit"
	auditoptions "kplane.dev/services/gateway/internal/audit/options"
	"kplane.dev/services/gateway/internal/authn"
	"kplane.dev/services/gateway/internal/authz"
	"kplane.dev/services/gateway/internal/availability"
	"kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/filters"
	"kplane.dev/services/gateway/internal/issuer"
	"kplane.dev/services/gateway/internal/openapi"
	"kplane.dev/services/gateway/internal/proxy"
	"kplane.dev/services/gateway/internal/routing"
	"kplane.dev/services/gateway/internal/watchshare"
)

// auditFlushTimeout bounds how long shutdown waits for the audit
// backends to send what they hold.
const auditFlushTimeout = 10 * time.Second

// Identity is who the gateway is when it calls core for itself (to
// register and follow APIServices).
func Identity() frontproxy.User {
	return frontproxy.User{Name: "system:kplane-gateway", Groups: []string{authz.SystemMasters, authn.AllAuthenticated}}
}

// Server is the gateway.
type Server struct {
	cfg   *Config
	log   *slog.Logger
	echo  *echo.Echo
	nc    *nats.Conn
	authn *authn.Authenticator
	authz *authz.Authorizer
	core  *routing.Backend
	// crd serves custom resources; nil without --crd-url.
	crd    *routing.Backend
	table  *routing.Table
	limits *filters.Filters
	// registered is kube's readiness hook of the APIService registration:
	// done once the routing table holds every APIService.
	registered *filters.PostStartHook
	discovery  *discovery.Merger
	openapi    *openapi.Merger
	// availability keeps the Available condition of every APIService.
	availability *availability.Controller
	// documents serves the discovery and OpenAPI documents.
	documents *echo.Echo
	// auditor audits requests; nil without an audit policy.
	auditor *auditoptions.Audit
	// watches shares watches of core and crd; nil without
	// --share-watches.
	watches *watchshare.Hub
}

// New builds the gateway cfg describes.
func New(cfg *Config) (*Server, error) {
	tp := cfg.serving.Tracing
	coreTransport, err := proxy.NewTransport(cfg.coreURLs, &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cfg.proxyClient},
		RootCAs:      cfg.backendCA,
	}, proxy.WithTracing(tp, "core"))
	if err != nil {
		return nil, fmt.Errorf("core backend: %w", err)
	}
	core := &routing.Backend{Name: "core", Transport: coreTransport}
	var crd *routing.Backend
	if len(cfg.crdURLs) > 0 {
		crdTransport, err := proxy.NewTransport(cfg.crdURLs, &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{cfg.proxyClient},
			RootCAs:      cfg.backendCA,
		}, proxy.WithTracing(tp, "crd"))
		if err != nil {
			return nil, fmt.Errorf("crd backend: %w", err)
		}
		crd = &routing.Backend{Name: "crd", Transport: crdTransport}
	}
	client, err := aggregator.NewForConfig(&restclient.Config{
		Host:      core.URL("").String(),
		Transport: asUser(coreTransport, Identity()),
		QPS:       -1,
	})
	if err != nil {
		return nil, fmt.Errorf("apiservice client: %w", err)
	}
	table, err := routing.New(routing.Options{
		Core:              core,
		CRD:               crd,
		Client:            client,
		Resolver:          cfg.resolver,
		ClientCertificate: cfg.proxyClient,
		Logger:            cfg.log,
		Tracing:           tp,
	})
	if err != nil {
		return nil, err
	}
	reg, err := metrics.NewRegistry()
	if err != nil {
		return nil, err
	}
	reviews, err := natsrpc.NewObserver(tp, reg)
	if err != nil {
		return nil, err
	}
	tokenCache, err := authn.NewCacheMetrics(reg)
	if err != nil {
		return nil, err
	}
	decisionCache, err := authz.NewCacheMetrics(reg)
	if err != nil {
		return nil, err
	}
	nc, err := cfg.nats.Connect("kplane-gateway")
	if err != nil {
		return nil, err
	}
	authorizer, err := authz.New(nc, authz.Options{
		AuthorizedTTL:   cfg.authorizedTTL,
		UnauthorizedTTL: cfg.unauthorizedTTL,
		Logger:          cfg.log,
		Tracing:         tp,
		Observer:        reviews,
		CacheMetrics:    decisionCache,
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	s := &Server{
		cfg: cfg,
		log: cfg.log,
		nc:  nc,
		authn: authn.New(nc, authn.Options{
			ClientCA:      cfg.serving.ClientCA,
			RequestHeader: cfg.requestHeader,
			Audiences:     cfg.apiAudiences,
			Anonymous:     cfg.anonymous,
			Logger:        cfg.log,
			Tracing:       tp,
			Observer:      reviews,
			CacheMetrics:  tokenCache,
		}),
		authz:      authorizer,
		core:       core,
		crd:        crd,
		table:      table,
		registered: filters.NewPostStartHook("apiservice-registration-controller"),
	}
	// An invalidation published while the connection is down is lost,
	// and with it the news of a revoked role or token: the caches start
	// afresh when the connection drops, and again when it is back, for a
	// review answered in between.
	nc.SetDisconnectErrHandler(func(_ *nats.Conn, err error) {
		s.flushCaches()
		s.log.Warn("nats connection lost, authentication and authorization caches flushed", "err", err)
	})
	nc.SetReconnectHandler(func(*nats.Conn) {
		s.flushCaches()
		s.log.Info("nats connection back, authentication and authorization caches flushed")
	})
	if s.limits, err = filters.New(cfg.filters, reg,
		filters.WithRequestInfo(requestInfo),
		filters.WithPrivileged(privileged),
		filters.WithUserName(userName),
		filters.WithLogger(cfg.log),
	); err != nil {
		return nil, err
	}
	if cfg.shareWatches {
		if s.watches, err = watchshare.New(cfg.log, reg, watchshare.DefaultLimits); err != nil {
			return nil, err
		}
	}
	if s.auditor, err = cfg.audit.New(nc, reg, cfg.log, requestInfo, filters.LongRunning); err != nil {
		return nil, err
	}
	// Every route carries its backend's client; core's is the fallback.
	backendClient := core.Client(0)
	// A backend's documents that change without a route changing (a CRD
	// established in a group already routed) refresh the OpenAPI
	// documents too.
	if s.discovery, err = discovery.New(routes{table}, backendClient,
		discovery.WithInterval(cfg.documentsInterval), discovery.WithLogger(cfg.log),
		discovery.WithOnChange(func() { s.openapi.Refresh() })); err != nil {
		return nil, err
	}
	if s.openapi, err = openapi.New(routes{table}, backendClient,
		openapi.WithInterval(cfg.documentsInterval), openapi.WithLogger(cfg.log),
		openapi.WithVersion(filters.VersionInfo().GitVersion)); err != nil {
		return nil, err
	}

	if s.availability, err = availability.New(client.ApiregistrationV1().APIServices(), endpoints{table: table, core: core},
		availability.WithInterval(cfg.availabilityInterval), availability.WithLogger(cfg.log)); err != nil {
		return nil, err
	}

	s.echo = echo.New()
	s.echo.HideBanner, s.echo.HidePort = true, true
	s.echo.HTTPErrorHandler = apistatus.HTTPErrorHandler
	for _, f := range s.filters() {
		s.echo.Use(f.wrap)
	}
	for _, h := range s.limits.HealthEndpoints(s.registered) {
		s.echo.GET("/"+h.Name, echo.WrapHandler(h.Handler))
		s.echo.GET("/"+h.Name+"/*", echo.WrapHandler(h.Handler))
	}
	version := echo.WrapHandler(filters.VersionHandler(filters.VersionInfo()))
	s.echo.GET("/version", version)
	s.echo.GET("/version/", version)
	s.echo.GET("/metrics", echo.WrapHandler(filters.MetricsHandler(reg)))
	// Authorized as the non-resource URLs they are, as kube's: the
	// bootstrap policy gives them to cluster-admin only.
	if cfg.serving.Profiles != nil {
		profiling.RegisterEcho(s.echo, cfg.serving.Profiles)
	}
	s.echo.GET(issuer.DiscoveryPath, issuer.Handler(nc, issuer.DiscoveryPath, reviews, cfg.log))
	s.echo.GET(issuer.KeysPath, issuer.Handler(nc, issuer.KeysPath, reviews, cfg.log))
	// The documents get a router of their own: echo matches
	// /apis/:group/:version for deeper paths too, which are resources to
	// proxy, so route picks the documents' paths itself.
	s.documents = echo.New()
	s.documents.HTTPErrorHandler = apistatus.HTTPErrorHandler
	s.discovery.Register(s.documents)
	s.openapi.Register(s.documents)
	s.echo.Any("/*", s.route)
	s.echo.Any("/", s.route)
	return s, nil
}

// flushCaches forgets every cached token review and access decision.
func (s *Server) flushCaches() {
	s.authn.Flush()
	s.authz.Flush()
}

// Handler is the gateway's HTTP handler, for tests that serve it
// themselves.
func (s *Server) Handler() http.Handler { return s.echo }

// Table is the routing table.
func (s *Server) Table() *routing.Table { return s.table }

// Run serves until ctx ends, then shuts down as kube-apiserver does:
// readiness fails for the shutdown delay while requests are still served,
// then watches end, the listener closes and requests in flight get up to
// the shutdown timeout to finish.
func (s *Server) Run(ctx context.Context) error {
	ln, err := s.cfg.serving.Listen()
	if err != nil {
		return err
	}
	// The authenticators verify client certificates.
	srv := s.cfg.serving.NewServer(s.cfg.serving.Tracing.Handler(s.echo, "KubernetesAPI", otelhttp.WithSpanNameFormatter(requestinfo.SpanName)))
	// The handshake names the front proxies' CA too, so that they pick
	// their certificate.
	srv.TLSConfig.ClientCAs = s.cfg.handshakeCAs
	// The public endpoint gives clients far away longer to send their
	// headers, and bounds them as kube does.
	srv.ReadHeaderTimeout = 30 * time.Second
	srv.MaxHeaderBytes = filters.MaxHeaderBytes
	if err := configureHTTP2(srv); err != nil {
		return err
	}

	// The background work outlives ctx: it keeps routes and documents
	// current while requests drain, and stops after them.
	bgCtx, stopBackground := context.WithCancel(context.Background())
	var background sync.WaitGroup
	bgErrs := make(chan error, 5)
	goBackground := func(run func(context.Context) error) {
		background.Go(func() { bgErrs <- run(bgCtx) })
	}
	goBackground(s.table.Run)
	goBackground(s.discovery.Run)
	goBackground(s.openapi.Run)
	goBackground(s.availability.Run)
	goBackground(s.followRoutes)

	runErr := serving.Serve(ctx, srv, ln, s.log, s.limits.Lifecycle().Drain)
	stopBackground()
	background.Wait()
	close(bgErrs)
	for err := range bgErrs {
		runErr = errors.Join(runErr, err)
	}
	s.core.Transport.CloseIdleConnections()
	if s.crd != nil {
		s.crd.Transport.CloseIdleConnections()
	}
	if err := s.authz.Close(); err != nil {
		runErr = errors.Join(runErr, err)
	}
	if s.auditor != nil {
		// The events of the last requests are sent before NATS closes.
		ctx, cancel := context.WithTimeout(context.Background(), auditFlushTimeout)
		runErr = errors.Join(runErr, s.auditor.Close(ctx))
		cancel()
	}
	s.nc.Close()
	if err := s.cfg.serving.Tracing.Shutdown(ctx); err != nil {
		runErr = errors.Join(runErr, err)
	}
	s.log.Info("stopped")
	return runErr
}

// followRoutes refreshes the documents and probes the APIServices again
// whenever the routes change, and
// completes the registration hook once the table first holds every
// APIService.
func (s *Server) followRoutes(ctx context.Context) error {
	changed, unsubscribe := s.table.Subscribe()
	defer unsubscribe()
	// The table reports it is synced just after its last change of the
	// initial sync, so readiness is polled until then.
	poll := time.NewTicker(50 * time.Millisecond)
	defer poll.Stop()
	registered := false
	for {
		if !registered && s.table.Synced() {
			// The documents are fetched before the gateway says it is
			// ready, so a client's first discovery is complete.
			if err := s.discovery.Sync(ctx); err != nil {
				s.log.Warn("first discovery sync", "err", err)
			}
			if err := s.openapi.Sync(ctx); err != nil {
				s.log.Warn("first openapi sync", "err", err)
			}
			s.registered.Complete()
			registered = true
			poll.Stop()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			s.discovery.Refresh()
			s.openapi.Refresh()
			s.availability.Trigger()
		case <-poll.C:
		}
	}
}

// route forwards a request to the backend of its group/version. Paths
// outside any group/version that the gateway does not serve itself go to
// core.
func (s *Server) route(c echo.Context) error {
	r := c.Request()
	if r.Method == http.MethodGet && documentPath(r.URL.Path) {
		s.documents.ServeHTTP(c.Response(), r)
		return nil
	}
	u, _ := frontproxy.UserFrom(r.Context())
	backend := s.core
	if gv, ok := groupVersion(r.URL.Path); ok {
		rt, found := s.table.Lookup(gv)
		switch {
		case !found && !s.table.Synced():
			// Not knowing the route yet is not knowing the group is
			// absent: clients retry a 503 with Retry-After.
			c.Response().Header().Set("Retry-After", "1")
			return apistatus.Write(c, apierrors.NewServiceUnavailable("the gateway's routing table is not synced yet"))
		case !found && s.crd == nil:
			return echo.ErrNotFound
		case !found:
			// A group without an APIService goes to crd, as
			// kube-aggregator hands it to the apiextensions server: a
			// CRD's APIService follows the CRD, and its custom
			// resources are served from the moment it is established,
			// also while the APIService is still being made (or made
			// again after the CRD was deleted and created anew). crd
			// answers 404 for a group it does not serve.
			backend = s.crd
		case !rt.Available || rt.Backend == nil:
			return apistatus.Write(c, apierrors.NewServiceUnavailable("service unavailable"))
		default:
			backend = rt.Backend
		}
	}
	own := backend == s.core || backend == s.crd
	if own {
		audit.TrustBackend(r.Context())
	}
	info := requestInfo(c)
	if filters.LongRunning(info) {
		defer s.finishOnShutdown(r.Context())
	}
	if info.Verb == "watch" {
		if s.watches != nil && own && s.watches.Serve(c.Response(), r, backend.Transport, u) {
			return nil
		}
		proxy.ForwardWatch(c.Response(), r, backend.Transport, u, s.log)
		return nil
	}
	proxy.Forward(c.Response(), r, backend.Transport, u, s.log)
	return nil
}

// finishOnShutdown ends a long-running response that shutdown cut short
// as a finished response rather than an aborted one, as kube ends its
// watches at shutdown: clients then see the stream end and watch again
// elsewhere instead of reporting an error. The proxy aborts (panics with
// http.ErrAbortHandler) when its request's context ends mid-stream; any
// other panic goes on.
func (s *Server) finishOnShutdown(ctx context.Context) {
	p := recover()
	if p == nil {
		return
	}
	if err, ok := p.(error); ok && errors.Is(err, http.ErrAbortHandler) && ctx.Err() != nil && s.limits.Lifecycle().Draining() {
		return
	}
	panic(p)
}

// documentPath reports whether path is a discovery or OpenAPI document
// the gateway serves itself: /api, /apis, /apis/<group>, /openapi/v2,
// /openapi/v3 and /openapi/v3/<group-version>.
func documentPath(path string) bool {
	if path == "/openapi/v2" || path == "/openapi/v3" || strings.HasPrefix(path, "/openapi/v3/") {
		return true
	}
	// /api/<v> and /apis/<g>/<v> go to the group-version's owner, as
	// kube-aggregator proxies them: always current, and 503 when the
	// owner is unavailable.
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch parts[0] {
	case "api":
		return len(parts) == 1
	case "apis":
		return len(parts) <= 2
	}
	return false
}

// groupVersion reads the group/version of /api/<v>[/...] and
// /apis/<g>/<v>[/...].
func groupVersion(path string) (schema.GroupVersion, bool) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api" && parts[1] != "":
		return schema.GroupVersion{Version: parts[1]}, true
	case len(parts) >= 3 && parts[0] == "apis" && parts[1] != "" && parts[2] != "":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, true
	}
	return schema.GroupVersion{}, false
}

// asUser sends every request through rt as u.
func asUser(rt http.RoundTripper, u frontproxy.User) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		frontproxy.SetHeaders(r.Header, &u)
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// configureHTTP2 has srv's HTTP/2 connections write, of the streams
// with frames waiting, any one next, instead of Go's default of taking
// every open stream of the connection in turn, idle or not. A client
// keeps its watches on one connection (client-go's informers do, up to
// the stream limit), and most are idle at any moment: with 200 of them,
// passing over the idle streams was 7% of the gateway's CPU while it
// delivered their events (issue 14; BenchmarkWatchEventOnABusyConnection).
// kube-apiserver's x/net server passes over them the same way.
func configureHTTP2(srv *http.Server) error {
	if err := http2.ConfigureServer(srv, &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler}); err != nil {
		return fmt.Errorf("configure HTTP/2: %w", err)
	}
	return nil
}
