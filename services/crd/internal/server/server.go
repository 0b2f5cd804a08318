package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiextensionsinformers "k8s.io/apiextensions-apiserver/pkg/client/informers/externalversions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/nslifecycle"
	"kplane.dev/libs/apiserver/objects"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	apiserver "kplane.dev/libs/apiserver/server"
	"kplane.dev/libs/election"
	"kplane.dev/libs/healthz"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/etcd3"
	"kplane.dev/libs/storageservice"
	"kplane.dev/services/crd/internal/controllers"
	"kplane.dev/services/crd/internal/crds"
	"kplane.dev/services/crd/internal/registry"
)

// LoopbackUser is who crd's own controllers act as when they reach crd
// through the loopback.
var LoopbackUser = frontproxy.User{Name: "system:kplane:crd", Groups: []string{"system:masters", "system:authenticated"}}

// informerResync is how often the CRD informer relists: changes arrive
// by watch, this bounds the harm of a lost event.
const informerResync = 10 * time.Minute

// Server is one replica of the crd service.
type Server struct {
	*storageservice.Service
	cfg *Config
	log *slog.Logger

	// synced is set once the replica serves the CRDs it found at start.
	synced atomic.Bool
}

// New builds a replica from cfg: it connects to etcd and NATS, builds the
// API and listens on the configured address. Run serves until its context
// ends and releases all of it.
func New(cfg *Config) (*Server, error) {
	svc, err := storageservice.New(cfg.Config, "crd", LoopbackUser)
	if err != nil {
		return nil, err
	}
	s := &Server{Service: svc, cfg: cfg, log: cfg.Log}
	if err := s.build(); err != nil {
		return nil, errors.Join(err, svc.Close())
	}
	return s, nil
}

func (s *Server) build() error {
	if s.NATS() == nil {
		s.log.Warn("no --nats-url: a write that creates through apply answers 503")
	}
	crdResource, err := crds.Resource()
	if err != nil {
		return fmt.Errorf("declare customresourcedefinitions: %w", err)
	}
	lifecycle, err := s.namespaceLifecycle()
	if err != nil {
		return err
	}
	// kplane runs no Services: the map says where a webhook's service
	// is, and kube's DNS rule where the map does not.
	services := s.cfg.ServiceMap.Or(webhook.NewDefaultServiceResolver())
	converters, err := conversion.NewCRConverterFactory(services, tracedWebhooks(s.cfg.Serving.Tracing))
	if err != nil {
		return fmt.Errorf("build the conversion webhook client: %w", err)
	}
	reg := registry.New([]*resource.Resource{crdResource}, converters, s.log)
	apiOpts := apiserver.Options{
		Resources: []*resource.Resource{crdResource},
		Stores:    s.Stores(),
		HandlerOptions: []rest.Option{
			rest.WithAdmission(append([]rest.Admission{lifecycle, reg.Terminating()}, s.Admission()...)...),
			rest.WithAuthorizer(authzreview.NewAuthorizer(authzreview.NewNATS(s.NATS(), s.cfg.ReviewTimeout, s.Reviews()))),
			rest.WithWatchMetrics(s.WatchMetrics()),
		},
		Missing: s.missing(reg),
		Logger:  s.log,
	}
	apiCfg, err := apiOpts.Config()
	if err != nil {
		return err
	}
	api, err := apiserver.New(apiCfg)
	if err != nil {
		return fmt.Errorf("build API server: %w", err)
	}
	synced := healthz.NamedCheck("poststarthook/crd-informer-synced", func(*http.Request) error {
		if !s.synced.Load() {
			return errors.New("the CustomResourceDefinitions are not yet served")
		}
		return nil
	})
	if err := s.Serve(api, synced); err != nil {
		return err
	}

	loopback, err := apiextensionsclientset.NewForConfig(s.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("build loopback client: %w", err)
	}
	factory := apiextensionsinformers.NewSharedInformerFactory(loopback, informerResync)
	informer := factory.Apiextensions().V1().CustomResourceDefinitions()
	informer.Informer() // registered before the factory starts
	s.Go("custom resources", func(ctx context.Context) error {
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		get := func(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
			return loopback.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
		}
		return reg.Run(ctx, api, informer, get, func() { s.synced.Store(true) })
	})

	dyn, err := dynamic.NewForConfig(s.LoopbackConfig())
	if err != nil {
		return fmt.Errorf("build loopback dynamic client: %w", err)
	}
	crdClient := loopback.ApiextensionsV1()
	finalizer := controllers.NewFinalizer(informer, crdClient, dyn, s.log)
	var discovered controllers.Discovered
	if s.cfg.API != nil {
		cfg := s.APIConfig()
		// A stuck gateway only delays the CRD, up to establishWait.
		cfg.Timeout = 5 * time.Second
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return fmt.Errorf("build the gateway's discovery client: %w", err)
		}
		discovered = controllers.GatewayDiscovery(dc.RESTClient())
	}
	s.Lead("crd conditions", func(ctx context.Context, _ election.Term) error {
		if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
			return nil
		}
		return controllers.Conditions(ctx, informer, crdClient, discovered, s.log)
	})
	s.Lead("crd finalizer", func(ctx context.Context, _ election.Term) error {
		if !cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced) {
			return nil
		}
		return finalizer.Run(ctx)
	})
	if s.cfg.API == nil {
		s.log.Warn("no --api-kubeconfig: the CRDs' group-versions are not registered as APIServices, the gateway does not route them, and CRDs are established without waiting for its discovery")
		return nil
	}
	agg, err := aggregator.NewForConfig(s.APIConfig())
	if err != nil {
		return fmt.Errorf("build APIService client: %w", err)
	}
	apiServices := controllers.NewAPIServices(informer, agg.ApiregistrationV1().APIServices(), s.log)
	s.Lead("crd registration", func(ctx context.Context, _ election.Term) error { return apiServices.Run(ctx) })
	return nil
}

// notSyncedRetry is how long a client waits before it sends again a
// request for a custom resource that came before the replica served the
// CRDs.
const notSyncedRetry = 1

// missing answers a request for a resource this replica does not serve.
// Before the replica serves the CRDs it found at start, the resource may
// well be a custom resource it is about to serve: the gateway sends to a
// replica as soon as it accepts connections, so a restarted replica
// would otherwise deny existing custom resources with 404. It answers
// kube's 503 for an unsynced CRD handler instead, with Retry-After so
// that clients send the request again by themselves. Afterwards the
// registry catches up with a CRD established through another replica.
func (s *Server) missing(reg *registry.Registry) func(context.Context, schema.GroupVersionResource) (bool, error) {
	return func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error) {
		if !s.synced.Load() {
			err := apierrors.NewServiceUnavailable("the CustomResourceDefinitions are not yet served")
			err.ErrStatus.Details = &metav1.StatusDetails{RetryAfterSeconds: notSyncedRetry}
			return false, err
		}
		return reg.Missing(ctx, gvr), nil
	}
}

// namespaceLifecycle keeps custom resources out of namespaces that do not
// exist or are being terminated, reading namespaces from etcd behind a
// watch cache of this replica's own, as core does.
func (s *Server) namespaceLifecycle() (*nslifecycle.Lifecycle, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("register core/v1: %w", err)
	}
	objs, err := objects.NewTyped(scheme, corev1.SchemeGroupVersion.WithKind("Namespace"), "NamespaceList")
	if err != nil {
		return nil, err
	}
	keys := storage.NewKeys(s.cfg.EtcdPrefix, "", "namespaces")
	m := s.StorageMetrics().Resource(schema.GroupResource{Resource: "namespaces"})
	direct := etcd3.New(s.Etcd(), objs, objs.New, etcd3.WithLogger(s.log), etcd3.WithMetrics(m))
	c, err := cacher.New(direct, objs.New, keys.Prefix(), cacher.WithLogger(s.log), cacher.WithMetrics(m))
	if err != nil {
		return nil, fmt.Errorf("build the namespaces' watch cache: %w", err)
	}
	s.Go("namespaces cache", func(ctx context.Context) error {
		c.Run(ctx)
		return nil
	})
	return nslifecycle.New(c, keys, nslifecycle.Immortal...), nil
}
