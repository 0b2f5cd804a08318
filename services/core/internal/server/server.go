package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/election"
	"kplane.dev/libs/healthz"
	"kplane.dev/libs/serving"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/compactor"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/controllers/garbagecollector"
	"kplane.dev/services/core/internal/kinds"
	"kplane.dev/services/core/internal/namespace"
	nscontroller "kplane.dev/services/core/internal/namespace/controller"
	"kplane.dev/services/core/internal/rbac/aggregation"
	"kplane.dev/services/core/internal/rbac/bootstrap"
	"kplane.dev/services/core/internal/rbac/escalation"
	"kplane.dev/services/core/internal/reviews"
)

// LoopbackUser is who core's own controllers act as when they reach core
// through the loopback.
var LoopbackUser = frontproxy.User{Name: "system:kplane:core", Groups: []string{"system:masters", "system:authenticated"}}

// systemNamespacesRetry is the wait between attempts at making the system
// namespaces.
const systemNamespacesRetry = time.Second

// etcdCheckTimeout bounds the etcd read of a health check.
const etcdCheckTimeout = 2 * time.Second

// task is work that runs as long as the server, or as long as a term of
// leadership.
type task struct {
	name string
	run  func(ctx context.Context) error
}

// leaderTask is work of the leader; its Term's Guard fences its writes.
type leaderTask struct {
	name string
	run  election.LeadFunc
}

// Server is one replica of the core-resource service.
type Server struct {
	cfg  *Config
	log  *slog.Logger
	etcd *clientv3.Client
	// nats carries the change feed and the reviews; nil without
	// --nats-url.
	nats *nats.Conn
	api  *apiserver.Server
	ln   net.Listener
	http *http.Server
	// loopback reaches the API handler in process, as LoopbackUser.
	loopback *restclient.Config

	// everyReplica runs on every replica; leaderOnly on the leader of the
	// controllers' election.
	everyReplica []task
	leaderOnly   []leaderTask

	shutdown *serving.Shutdown
	// systemNamespaces is set once the system namespaces exist.
	systemNamespaces atomic.Bool
	// bootstrapRoles is set once the default RBAC policy exists.
	bootstrapRoles atomic.Bool
	// watchCtx ends every watch at the start of shutdown, before the HTTP
	// server waits for requests in flight: a watch never finishes by
	// itself.
	watchCtx    context.Context
	stopWatches context.CancelFunc
}

// New builds a replica from cfg: it connects to etcd, builds the API and
// listens on the configured address. Run serves until its context ends and
// releases all of it; a Server that New returned must be Run.
func New(cfg *Config) (*Server, error) {
	s := &Server{cfg: cfg, log: cfg.log}
	s.watchCtx, s.stopWatches = context.WithCancel(context.Background())
	etcdCfg := cfg.etcd
	etcdCfg.Logger = zap.NewNop()
	etcd, err := clientv3.New(etcdCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	s.etcd = etcd
	if err := s.build(); err != nil {
		return nil, errors.Join(err, s.closeClients())
	}
	ln, err := cfg.serving.Listen()
	if err != nil {
		return nil, errors.Join(err, s.closeClients())
	}
	s.ln = ln
	return s, nil
}

// build assembles the handlers and the background work.
func (s *Server) build() error {
	cfg := s.cfg
	if err := s.connectNATS(); err != nil {
		return err
	}
	// The loopback reaches the API built below; nothing calls it before
	// the server serves, by which time api is set.
	var api http.Handler
	s.loopback = frontproxy.LoopbackConfig(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r)
	}), LoopbackUser)
	loopback, err := kubernetes.NewForConfig(s.loopback)
	if err != nil {
		return fmt.Errorf("build loopback client: %w", err)
	}
	res, err := kinds.Resources(clock.RealClock{})
	if err != nil {
		return fmt.Errorf("declare resources: %w", err)
	}
	rpc := reviews.NewNATS(s.nats, cfg.reviewTimeout)
	if res, err = kinds.WithReviews(res, rpc, reviews.NewTokenRequests(rpc, loopback), clock.RealClock{}); err != nil {
		return fmt.Errorf("declare reviews: %w", err)
	}
	stores, lifecycle, err := s.stores(res)
	if err != nil {
		return err
	}
	apiOpts := apiserver.Options{
		Resources: res,
		Stores:    stores,
		HandlerOptions: []rest.Option{
			rest.WithAdmission(lifecycle, escalation.New(rpc, loopback, s.log)),
			rest.WithAuthorizer(reviews.NewAuthorizer(rpc)),
		},
		Logger: s.log,
	}
	apiCfg, err := apiOpts.Config()
	if err != nil {
		return err
	}
	if s.api, err = apiserver.New(apiCfg); err != nil {
		return fmt.Errorf("build API server: %w", err)
	}
	auth, err := frontproxy.New(frontproxy.Options{ClientCA: cfg.serving.ClientCA, AllowedNames: cfg.allowedNames, Logger: s.log})
	if err != nil {
		return err
	}
	api = s.endWatchesOnShutdown(s.api.Handler())

	mux := http.NewServeMux()
	etcdCheck := healthz.NamedCheck("etcd", s.checkEtcd)
	// Watches end once the delay is over: a watch never finishes by
	// itself and would hold the shutdown to its timeout.
	s.shutdown = cfg.serving.NewShutdown(func(context.Context) { s.stopWatches() })
	bootstrap := healthz.NamedCheck("poststarthook/system-namespaces", func(*http.Request) error {
		if !s.systemNamespaces.Load() {
			return errors.New("system namespaces not yet created")
		}
		return nil
	})
	bootstrapRoles := healthz.NamedCheck("poststarthook/rbac/bootstrap-roles", func(*http.Request) error {
		if !s.bootstrapRoles.Load() {
			return errors.New("bootstrap roles not yet created")
		}
		return nil
	})
	ping := healthz.Ping()
	for endpoint, checks := range map[string][]healthz.Checker{
		"healthz": {ping, etcdCheck, bootstrap, bootstrapRoles},
		"livez":   {ping, etcdCheck},
		"readyz":  {ping, etcdCheck, bootstrap, bootstrapRoles, s.shutdown.Check()},
	} {
		h := healthz.Handler(endpoint, checks...)
		mux.Handle("/"+endpoint, h)
		mux.Handle("/"+endpoint+"/", h)
	}
	mux.Handle("/", auth.Wrap(api))

	// The front proxy authenticator verifies client certificates.
	s.http = cfg.serving.NewServer(mux)

	if cfg.compactionInterval > 0 {
		c := compactor.New(s.etcd,
			compactor.WithInterval(cfg.compactionInterval),
			compactor.WithPrefix(path.Join(cfg.etcdPrefix, "compactor")),
			compactor.WithLogger(s.log))
		s.everyReplica = append(s.everyReplica, task{name: "compactor", run: c.Run})
	}
	s.everyReplica = append(s.everyReplica,
		task{name: "system namespaces", run: func(ctx context.Context) error {
			return s.ensureSystemNamespaces(ctx, loopback)
		}},
		task{name: "bootstrap roles", run: func(ctx context.Context) error {
			return s.ensureBootstrapRoles(ctx, loopback)
		}})
	if err := s.controllers(); err != nil {
		return err
	}
	if err := s.changeFeed(res); err != nil {
		return err
	}
	s.everyReplica = append(s.everyReplica, task{name: "controllers election", run: func(ctx context.Context) error {
		return election.Run(ctx, s.etcd, path.Join(cfg.etcdPrefix, "core", "leader"), s.lead, election.WithLogger(s.log))
	}})
	return nil
}

// stores are the stores of res: each in etcd behind a watch cache, events
// of both groups sharing one, and the namespace lifecycle admission reading
// the namespaces' store that serves them.
func (s *Server) stores(res []*resource.Resource) (apiserver.StoreFunc, *namespace.Lifecycle, error) {
	base := kinds.Stores(apiserver.CachedEtcdStores(s.etcd, s.cfg.etcdPrefix, s.log))
	i := slices.IndexFunc(res, func(r *resource.Resource) bool { return r.GroupVersionResource == kinds.Namespaces })
	if i < 0 {
		return nil, nil, errors.New("kinds declare no namespaces")
	}
	nsStore, nsKeys, err := base(res[i])
	if err != nil {
		return nil, nil, fmt.Errorf("build store of namespaces: %w", err)
	}
	stores := func(r *resource.Resource) (storage.Interface, storage.Keys, error) {
		if r.GroupVersionResource == kinds.Namespaces {
			return nsStore, nsKeys, nil
		}
		return base(r)
	}
	return stores, namespace.NewLifecycle(nsStore, nsKeys, namespace.Immortal...), nil
}

// changeFeed publishes every committed change to JetStream, from the
// leader of an election of its own, when a NATS URL is configured. The
// connection retries in the background: NATS may come up after core.
func (s *Server) changeFeed(res []*resource.Resource) error {
	if s.nats == nil {
		s.log.Warn("no --nats-url: the change feed is not published")
		return nil
	}
	js, err := jetstream.New(s.nats)
	if err != nil {
		return fmt.Errorf("open JetStream: %w", err)
	}
	published := map[schema.GroupResource]schema.GroupVersionKind{}
	for _, r := range res {
		published[r.GroupVersionResource.GroupResource()] = r.GroupVersionResource.GroupVersion().WithKind(r.Kind)
	}
	opts := []changefeed.Option{changefeed.WithKinds(published), changefeed.WithLogger(s.log)}
	if s.cfg.changeSecretData {
		s.log.Warn("the change feed carries the data of Secrets: whoever reads it reads every Secret")
		opts = append(opts, changefeed.WithSecretData())
	}
	p := changefeed.NewPublisher(s.etcd, js, s.cfg.etcdPrefix, opts...)
	s.everyReplica = append(s.everyReplica, task{name: "change feed election", run: func(ctx context.Context) error {
		return election.Run(ctx, s.etcd, path.Join(s.cfg.etcdPrefix, "changefeed"), func(ctx context.Context, _ election.Term) error {
			return p.Run(ctx)
		}, election.WithLogger(s.log))
	}})
	return nil
}

// connectNATS connects to NATS when a URL is configured. The connection
// retries in the background: NATS may come up after core.
func (s *Server) connectNATS() error {
	if s.cfg.nats.URL == "" {
		s.log.Warn("no --nats-url: reviews, token requests and RBAC escalation checks answer 503")
		return nil
	}
	nc, err := s.cfg.nats.Connect("kplane-core")
	if err != nil {
		return err
	}
	s.nats = nc
	return nil
}

// controllers are the leader's work, acting on the API through APIConfig.
func (s *Server) controllers() error {
	clients, err := apiclient.New(s.APIConfig())
	if err != nil {
		return fmt.Errorf("build controllers' clients: %w", err)
	}
	gc, err := garbagecollector.New(clients, garbagecollector.WithLogger(s.log))
	if err != nil {
		return fmt.Errorf("build garbage collector: %w", err)
	}
	aggregator := aggregation.New(clients.Kube, aggregation.WithLogger(s.log))
	deleter := nscontroller.NewNamespaceDeleter(clients, nscontroller.WithDeleterLogger(s.log))
	serviceAccounts := nscontroller.NewServiceAccounts(clients, nscontroller.WithServiceAccountsLogger(s.log))
	s.leaderOnly = []leaderTask{
		{name: "garbage collector", run: func(ctx context.Context, _ election.Term) error { return gc.Run(ctx) }},
		{name: "namespace deleter", run: func(ctx context.Context, _ election.Term) error { return deleter.Run(ctx) }},
		{name: "default service accounts", run: func(ctx context.Context, _ election.Term) error { return serviceAccounts.Run(ctx) }},
		{name: "clusterrole aggregation", run: func(ctx context.Context, _ election.Term) error { return aggregator.Run(ctx) }},
	}
	return nil
}

// ensureSystemNamespaces makes the system namespaces through the loopback,
// every replica at start as kube-apiserver does, so a replica is ready only
// once "default" exists whether or not it leads; it retries until it
// succeeds.
func (s *Server) ensureSystemNamespaces(ctx context.Context, kube kubernetes.Interface) error {
	for {
		err := nscontroller.EnsureSystemNamespaces(ctx, kube)
		if err == nil {
			s.systemNamespaces.Store(true)
			return nil
		}
		s.log.Warn("create system namespaces", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(systemNamespacesRetry):
		}
	}
}

// ensureBootstrapRoles creates the default RBAC policy that is missing,
// on every replica at start as kube-apiserver's rbac/bootstrap-roles
// post-start hook does, so that each replica is ready only once it
// exists; it retries until it succeeds.
func (s *Server) ensureBootstrapRoles(ctx context.Context, kube kubernetes.Interface) error {
	for {
		err := bootstrap.Ensure(ctx, kube)
		if err == nil {
			s.bootstrapRoles.Store(true)
			return nil
		}
		s.log.Warn("create bootstrap roles", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(systemNamespacesRetry):
		}
	}
}

// endWatchesOnShutdown gives watches a context that also ends when the
// server starts shutting down.
func (s *Server) endWatchesOnShutdown(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := requestinfo.Parse(r.Method, r.URL); info.Verb == "watch" {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			defer context.AfterFunc(s.watchCtx, cancel)()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) checkEtcd(r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), etcdCheckTimeout)
	defer cancel()
	if _, err := s.etcd.Get(ctx, path.Join(s.cfg.etcdPrefix, "health"), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("read etcd: %w", err)
	}
	return nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// LoopbackConfig is a client-go config that reaches this replica's API in
// process, as LoopbackUser.
func (s *Server) LoopbackConfig() *restclient.Config { return restclient.CopyConfig(s.loopback) }

// APIConfig is the endpoint the controllers act through: --api-kubeconfig,
// or the loopback.
func (s *Server) APIConfig() *restclient.Config {
	if s.cfg.api != nil {
		return restclient.CopyConfig(s.cfg.api)
	}
	return s.LoopbackConfig()
}

// Run serves until ctx ends, then shuts down in order: readiness fails,
// serving goes on for the shutdown delay, watches end, requests in flight
// finish, background work stops, the watch caches stop, the etcd client
// closes. It returns an error when serving or shutting down failed.
func (s *Server) Run(ctx context.Context) error {
	defer s.stopWatches()
	// The stores outlive ctx until the last request is served.
	storesCtx, stopStores := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStores()
	storesDone := make(chan error, 1)
	go func() { storesDone <- s.api.Run(storesCtx) }()

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	var work sync.WaitGroup
	for _, t := range s.everyReplica {
		work.Go(func() {
			if err := t.run(workCtx); err != nil && workCtx.Err() == nil {
				s.log.Error("background work ended", "task", t.name, "err", err)
			}
		})
	}

	serveErr := serving.Serve(ctx, s.http, s.ln, s.log, s.shutdown.Run)
	stopWork()
	work.Wait()
	stopStores()
	if err := <-storesDone; err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("run stores: %w", err))
	}
	return errors.Join(serveErr, s.closeClients())
}

// lead runs the leader's work for one term. Work that fails ends the
// term, so another replica, or this one after a backoff, starts it anew;
// work that finishes leaves the rest running.
func (s *Server) lead(ctx context.Context, t election.Term) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(s.leaderOnly))
	for _, w := range s.leaderOnly {
		go func() {
			err := w.run(ctx, t)
			if err != nil {
				err = fmt.Errorf("%s: %w", w.name, err)
				cancel()
			}
			errs <- err
		}()
	}
	var first error
	for range s.leaderOnly {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// closeClients closes the connections to NATS and etcd.
func (s *Server) closeClients() error {
	if s.nats != nil {
		s.nats.Close()
	}
	if err := s.etcd.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}
