package storageservice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/admissionreview"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/rest"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/election"
	"kplane.dev/libs/healthz"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/serving"
	"kplane.dev/libs/storage/compactor"
	"kplane.dev/libs/storage/storagemetrics"
)

// etcdCheckTimeout bounds the etcd read of a health check.
const etcdCheckTimeout = 2 * time.Second

// task is work that runs as long as the service.
type task struct {
	name string
	run  func(ctx context.Context) error
}

// leaderTask is work of the leader; its Term's Guard fences its writes.
type leaderTask struct {
	name string
	run  election.LeadFunc
}

// Service is one replica of a storage service as a process.
type Service struct {
	cfg  *Config
	name string
	log  *slog.Logger
	etcd *clientv3.Client
	// nats is nil without --nats-url.
	nats *nats.Conn
	// reviews is what the reviews the service asks for over NATS report
	// to.
	reviews *natsrpc.Observer
	api     *apiserver.Server
	// handler is the API behind the watch ending, what the loopback
	// reaches.
	handler http.Handler
	ln      net.Listener
	http    *http.Server
	// loopback reaches handler in process, as the service's own user.
	loopback *restclient.Config

	// registry is what /metrics serves; storage, watches, elections and
	// the reviews asked over NATS record in it.
	registry  *prometheus.Registry
	storage   *storagemetrics.Metrics
	watches   *rest.WatchMetrics
	elections *election.Metrics

	everyReplica []task
	leaderOnly   []leaderTask

	shutdown *serving.Shutdown
	// watchCtx ends every watch at the start of shutdown, before the HTTP
	// server waits for requests in flight: a watch never finishes by
	// itself.
	watchCtx    context.Context
	stopWatches context.CancelFunc
}

// New connects the replica of the service called name ("core", "crd") to
// etcd and, when configured, to NATS. Its loopback acts as user. A Service
// that New returned must be Run, or Closed when building the rest failed.
func New(cfg *Config, name string, user frontproxy.User) (*Service, error) {
	s := &Service{cfg: cfg, name: name, log: cfg.Log}
	if err := s.newMetrics(); err != nil {
		return nil, err
	}
	var err error
	if s.reviews, err = natsrpc.NewObserver(cfg.Serving.Tracing, s.registry); err != nil {
		return nil, err
	}
	s.watchCtx, s.stopWatches = context.WithCancel(context.Background())
	etcdCfg := cfg.Etcd
	etcdCfg.Logger = etcdLogger(s.log)
	etcdCfg.DialOptions = append(etcdCfg.DialOptions, cfg.Serving.Tracing.GRPCDialOptions()...)
	etcd, err := clientv3.New(etcdCfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	s.etcd = etcd
	if cfg.NATS.URL != "" {
		// The connection retries in the background: NATS may come up
		// after the service.
		if s.nats, err = cfg.NATS.Connect("kplane-" + name); err != nil {
			return nil, errors.Join(err, s.Close())
		}
	}
	s.loopback = frontproxy.LoopbackConfig(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Nothing calls the loopback before Serve sets the handler:
		// controllers start with Run.
		s.handler.ServeHTTP(w, r)
	}), user)
	if cfg.CompactionInterval > 0 {
		c := compactor.New(s.etcd,
			compactor.WithInterval(cfg.CompactionInterval),
			compactor.WithPrefix(path.Join(cfg.EtcdPrefix, "compactor")),
			compactor.WithLogger(s.log))
		s.Go("compactor", c.Run)
	}
	return s, nil
}

// newMetrics builds the registry /metrics serves, with the storage,
// watch and election metrics every storage service reports.
func (s *Service) newMetrics() error {
	var err error
	if s.registry, err = metrics.NewRegistry(); err != nil {
		return err
	}
	if s.storage, err = storagemetrics.New(s.registry); err != nil {
		return err
	}
	if s.watches, err = rest.NewWatchMetrics(s.registry); err != nil {
		return err
	}
	s.elections, err = election.NewMetrics(s.registry)
	return err
}

// Admission are the admission steps the configuration adds after the
// service's own: the admission service, when --admission asks for it.
func (s *Service) Admission() []rest.Admission {
	if !s.cfg.Admission {
		return nil
	}
	return []rest.Admission{admissionreview.New(s.nats, admissionreview.DefaultTimeout, admissionreview.WithObserver(s.reviews))}
}

// Reviews is what the reviews the service asks for over NATS report to
// (natsrpc.Observe).
func (s *Service) Reviews() *natsrpc.Observer { return s.reviews }

// Etcd is the service's etcd client.
func (s *Service) Etcd() *clientv3.Client { return s.etcd }

// NATS is the service's NATS connection; nil without --nats-url.
func (s *Service) NATS() *nats.Conn { return s.nats }

// Registerer is where the service's own metrics go, beside the storage,
// watch and election metrics: what /metrics serves.
func (s *Service) Registerer() prometheus.Registerer { return s.registry }

// Stores are the service's resources' stores: each in etcd behind a
// watch cache, measured.
func (s *Service) Stores() apiserver.StoreFunc {
	return apiserver.CachedEtcdStores(s.etcd, s.cfg.EtcdPrefix, s.log, s.storage)
}

// StorageMetrics are the storage metrics, for a store the service builds
// beside Stores.
func (s *Service) StorageMetrics() *storagemetrics.Metrics { return s.storage }

// WatchMetrics are the metrics of the watches the API serves, for its
// handlers (rest.WithWatchMetrics).
func (s *Service) WatchMetrics() *rest.WatchMetrics { return s.watches }

// ElectionMetrics record the state of the service's elections
// (election.WithMetrics).
func (s *Service) ElectionMetrics() *election.Metrics { return s.elections }

// Log is where the service logs.
func (s *Service) Log() *slog.Logger { return s.log }

// Config is what the service was built from.
func (s *Service) Config() *Config { return s.cfg }

// Serve makes api the service's API, behind the front proxy
// authentication, with /healthz, /livez and /readyz open to any client
// and /metrics to a client certificate of --client-ca-file; checks are
// the service's own conditions of health and readiness. It listens on the
// configured address.
func (s *Service) Serve(api *apiserver.Server, checks ...healthz.Checker) error {
	if s.api != nil {
		return errors.New("serve: already serving")
	}
	auth, err := frontproxy.New(frontproxy.Options{ClientCA: s.cfg.Serving.ClientCA, AllowedNames: s.cfg.AllowedNames, Logger: s.log})
	if err != nil {
		return err
	}
	s.api = api
	s.handler = s.endWatchesOnShutdown(api.Handler())

	// Watches end once the delay is over: a watch never finishes by
	// itself and would hold the shutdown to its timeout.
	s.shutdown = s.cfg.Serving.NewShutdown(func(context.Context) { s.stopWatches() })
	etcdCheck := healthz.NamedCheck("etcd", s.checkEtcd)
	ping := healthz.Ping()
	mux := http.NewServeMux()
	for endpoint, cs := range map[string][]healthz.Checker{
		"healthz": append([]healthz.Checker{ping, etcdCheck}, checks...),
		"livez":   {ping, etcdCheck},
		"readyz":  append(append([]healthz.Checker{ping, etcdCheck}, checks...), s.shutdown.Check()),
	} {
		h := healthz.Handler(endpoint, cs...)
		mux.Handle("/"+endpoint, h)
		mux.Handle("/"+endpoint+"/", h)
	}
	// Metrics name no user: any certificate of the client CA may read
	// them, as it may the other services' metrics.
	mux.Handle(metrics.Path, metrics.Handler(s.registry, s.cfg.Serving.ClientCA, s.log))
	if h := s.cfg.Serving.InternalProfiles(); h != nil {
		profiling.RegisterMux(mux, h)
	}
	// The API's requests continue the gateway's trace; health checks
	// start none.
	mux.Handle("/", s.cfg.Serving.Tracing.Handler(auth.Wrap(s.handler), "KubernetesAPI", otelhttp.WithSpanNameFormatter(requestinfo.SpanName)))
	// The front proxy authenticator verifies client certificates.
	s.http = s.cfg.Serving.NewServer(mux)
	ln, err := s.cfg.Serving.Listen()
	if err != nil {
		return err
	}
	s.ln = ln
	return nil
}

// Go runs work on every replica for as long as the service runs; an
// error it returns before then is logged.
func (s *Service) Go(name string, run func(ctx context.Context) error) {
	s.everyReplica = append(s.everyReplica, task{name: name, run: run})
}

// Lead runs work on the replica that leads the service's controllers'
// election, for as long as it leads.
func (s *Service) Lead(name string, run election.LeadFunc) {
	s.leaderOnly = append(s.leaderOnly, leaderTask{name: name, run: run})
}

// endWatchesOnShutdown gives watches a context that also ends when the
// server starts shutting down.
func (s *Service) endWatchesOnShutdown(next http.Handler) http.Handler {
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

func (s *Service) checkEtcd(r *http.Request) error {
	ctx, cancel := context.WithTimeout(r.Context(), etcdCheckTimeout)
	defer cancel()
	if _, err := s.etcd.Get(ctx, path.Join(s.cfg.EtcdPrefix, "health"), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("read etcd: %w", err)
	}
	return nil
}

// Addr is the address the service listens on.
func (s *Service) Addr() net.Addr { return s.ln.Addr() }

// LoopbackConfig is a client-go config that reaches this replica's API in
// process, as the service's own user.
func (s *Service) LoopbackConfig() *restclient.Config { return restclient.CopyConfig(s.loopback) }

// APIConfig is the endpoint the controllers act through: --api-kubeconfig,
// or the loopback.
func (s *Service) APIConfig() *restclient.Config {
	if s.cfg.API != nil {
		return restclient.CopyConfig(s.cfg.API)
	}
	return s.LoopbackConfig()
}

// Run serves until ctx ends, then shuts down in order: readiness fails,
// serving goes on for the shutdown delay, watches end, requests in flight
// finish, background work stops, the stores (watch caches) stop, the
// clients close. It returns an error when serving or shutting down failed.
func (s *Service) Run(ctx context.Context) error {
	if s.api == nil {
		return errors.Join(errors.New("run: Serve was not called"), s.Close())
	}
	defer s.stopWatches()
	// The stores outlive ctx until the last request is served.
	storesCtx, stopStores := context.WithCancel(context.WithoutCancel(ctx))
	defer stopStores()
	storesDone := make(chan error, 1)
	go func() { storesDone <- s.api.Run(storesCtx) }()

	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	work := s.everyReplica
	if len(s.leaderOnly) > 0 {
		work = append(work, task{name: "controllers election", run: func(ctx context.Context) error {
			return election.Run(ctx, s.etcd, path.Join(s.cfg.EtcdPrefix, s.name, "leader"), s.lead, election.WithLogger(s.log), election.WithMetrics(s.elections, "controllers"))
		}})
	}
	var wg sync.WaitGroup
	for _, t := range work {
		wg.Go(func() {
			if err := t.run(workCtx); err != nil && workCtx.Err() == nil {
				s.log.Error("background work ended", "task", t.name, "err", err)
			}
		})
	}

	serveErr := serving.Serve(ctx, s.http, s.ln, s.log, s.shutdown.Run)
	stopWork()
	wg.Wait()
	stopStores()
	if err := <-storesDone; err != nil {
		serveErr = errors.Join(serveErr, fmt.Errorf("run stores: %w", err))
	}
	return errors.Join(serveErr, s.Close(), s.cfg.Serving.Tracing.Shutdown(ctx))
}

// lead runs the leader's work for one term. Work that fails ends the
// term, so another replica, or this one after a backoff, starts it anew;
// work that finishes leaves the rest running.
func (s *Service) lead(ctx context.Context, t election.Term) error {
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

// Close closes the connections to NATS and etcd; Run calls it as it
// ends, a service whose construction failed after New calls it itself.
func (s *Service) Close() error {
	if s.nats != nil {
		s.nats.Close()
	}
	if err := s.etcd.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd client: %w", err)
	}
	return nil
}
