package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/nslifecycle"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/changefeed"
	"kplane.dev/libs/election"
	"kplane.dev/libs/healthz"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storageservice"
	"kplane.dev/services/core/internal/apiclient"
	"kplane.dev/services/core/internal/controllers/garbagecollector"
	"kplane.dev/services/core/internal/kinds"
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

// Server is one replica of the core-resource service.
type Server struct {
	*storageservice.Service
	cfg *Config
	log *slog.Logger

	// systemNamespaces is set once the system namespaces exist.
	systemNamespaces atomic.Bool
	// bootstrapRoles is set once the default RBAC policy exists.
	bootstrapRoles atomic.Bool
}

// New builds a replica from cfg: it connects to etcd, builds the API and
// listens on the configured address. Run serves until its context ends and
// releases all of it; a Server that New returned must be Run.
func New(cfg *Config) (*Server, error) {
	svc, err := storageservice.New(cfg.Config, "core", LoopbackUser)
	if err != nil {
		return nil, err
	}
	s := &Server{Service: svc, cfg: cfg, log: cfg.Log}
	if err := s.build(); err != nil {
		return nil, errors.Join(err, svc.Close())
	}
	return s, nil
}

// build assembles the handlers and the background work.
func (s *Server) build() error {
	if s.NATS() == nil {
		s.log.Warn("no --nats-url: reviews, token requests and RBAC escalation checks answer 503")
	}
	loopback, err := kubernetes.NewForConfig(s.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("build loopback client: %w", err)
	}
	res, err := kinds.Resources(clock.RealClock{})
	if err != nil {
		return fmt.Errorf("declare resources: %w", err)
	}
	rpc := authzreview.NewNATS(s.NATS(), s.cfg.ReviewTimeout, s.Reviews())
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
			rest.WithAdmission(append([]rest.Admission{lifecycle, escalation.New(rpc, loopback, s.log)}, s.Admission()...)...),
			rest.WithAuthorizer(authzreview.NewAuthorizer(rpc)),
			rest.WithWatchMetrics(s.WatchMetrics()),
		},
		Logger: s.log,
	}
	apiCfg, err := apiOpts.Config()
	if err != nil {
		return err
	}
	api, err := apiserver.New(apiCfg)
	if err != nil {
		return fmt.Errorf("build API server: %w", err)
	}
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
	if err := s.Serve(api, bootstrap, bootstrapRoles); err != nil {
		return err
	}
	s.Go("system namespaces", func(ctx context.Context) error {
		return s.ensureSystemNamespaces(ctx, loopback)
	})
	s.Go("bootstrap roles", func(ctx context.Context) error {
		return s.ensureBootstrapRoles(ctx, loopback)
	})
	if err := s.controllers(api); err != nil {
		return err
	}
	return s.changeFeed(res)
}

// stores are the stores of res: each in etcd behind a watch cache, events
// of both groups sharing one, and the namespace lifecycle admission reading
// the namespaces' store that serves them.
func (s *Server) stores(res []*resource.Resource) (apiserver.StoreFunc, *nslifecycle.Lifecycle, error) {
	base := kinds.Stores(s.Stores())
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
	return stores, nslifecycle.New(nsStore, nsKeys, nslifecycle.Immortal...), nil
}

// changeFeed publishes every committed change to JetStream, from the
// leader of an election of its own, when a NATS URL is configured. The
// connection retries in the background: NATS may come up after core.
func (s *Server) changeFeed(res []*resource.Resource) error {
	if s.NATS() == nil {
		s.log.Warn("no --nats-url: the change feed is not published")
		return nil
	}
	js, err := jetstream.New(s.NATS())
	if err != nil {
		return fmt.Errorf("open JetStream: %w", err)
	}
	published := map[schema.GroupResource]schema.GroupVersionKind{}
	for _, r := range res {
		published[r.GroupVersionResource.GroupResource()] = r.GroupVersionResource.GroupVersion().WithKind(r.Kind)
	}
	// Custom resources are published too, under their stored version:
	// one stream carries every change under the prefix.
	opts := []changefeed.Option{changefeed.WithKinds(published), changefeed.WithOtherResources(), changefeed.WithLogger(s.log), changefeed.WithTracing(s.cfg.Serving.Tracing)}
	if s.cfg.changeSecretData {
		s.log.Warn("the change feed carries the data of Secrets: whoever reads it reads every Secret")
		opts = append(opts, changefeed.WithSecretData())
	}
	m, err := changefeed.NewMetrics(s.Registerer())
	if err != nil {
		return err
	}
	opts = append(opts, changefeed.WithMetrics(m))
	p := changefeed.NewPublisher(s.Etcd(), js, s.cfg.EtcdPrefix, opts...)
	s.Go("change feed election", func(ctx context.Context) error {
		return election.Run(ctx, s.Etcd(), path.Join(s.cfg.EtcdPrefix, "changefeed"), func(ctx context.Context, _ election.Term) error {
			return p.Run(ctx)
		}, election.WithLogger(s.log), election.WithMetrics(s.ElectionMetrics(), "changefeed"))
	})
	return nil
}

// controllers are the leader's work, acting on the API through APIConfig.
// They list and watch the metadata of what core stores in process, from
// api's stores, and that of custom resources from etcd, where crd stores
// them below the same prefix: the garbage collector watches every
// resource, and through the gateway each change cost it about 140 µs of
// CPU (issue 14). The garbage collector keeps only what ownership needs
// of each object, so its custom resources are decoded only that far.
func (s *Server) controllers(api *apiserver.Server) error {
	clients, err := apiclient.New(s.APIConfig())
	if err != nil {
		return fmt.Errorf("build controllers' clients: %w", err)
	}
	remote := clients.Metadata
	clients.Metadata = api.Metadata(remote, apiserver.CustomResourcesIn(s.Etcd(), s.cfg.EtcdPrefix))
	gcClients := *clients
	gcClients.Metadata = api.Metadata(remote, apiserver.CustomResourcesIn(s.Etcd(), s.cfg.EtcdPrefix), apiserver.OwnershipOnly())
	gc, err := garbagecollector.New(&gcClients, garbagecollector.WithLogger(s.log))
	if err != nil {
		return fmt.Errorf("build garbage collector: %w", err)
	}
	aggregator := aggregation.New(clients.Kube, aggregation.WithLogger(s.log))
	deleter := nscontroller.NewNamespaceDeleter(clients, nscontroller.WithDeleterLogger(s.log))
	serviceAccounts := nscontroller.NewServiceAccounts(clients, nscontroller.WithServiceAccountsLogger(s.log))
	s.Lead("garbage collector", func(ctx context.Context, _ election.Term) error { return gc.Run(ctx) })
	s.Lead("namespace deleter", func(ctx context.Context, _ election.Term) error { return deleter.Run(ctx) })
	s.Lead("default service accounts", func(ctx context.Context, _ election.Term) error { return serviceAccounts.Run(ctx) })
	s.Lead("clusterrole aggregation", func(ctx context.Context, _ election.Term) error { return aggregator.Run(ctx) })
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
