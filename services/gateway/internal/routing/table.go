package routing

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/tools/cache"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	"k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	informers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"

	"kplane.dev/libs/serviceresolver"
	"kplane.dev/libs/tracing"
	"kplane.dev/services/gateway/internal/proxy"
)

// Backend is a service the gateway forwards to.
type Backend struct {
	// Name is "core" for core and "<namespace>/<name>" for the service
	// of an APIService.
	Name string
	// Transport reaches the backend's replicas over mTLS with the
	// gateway's client certificate; it sends every request to a replica,
	// whatever host the request's URL names.
	Transport *proxy.Transport
}

// Client is an HTTP client of b. Requests sent through it still need the
// front proxy identity headers (frontproxy.SetHeaders) to pass a backend's
// authentication.
func (b *Backend) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: b.Transport, Timeout: timeout}
}

// URL is the URL of path on b.
func (b *Backend) URL(path string) *url.URL {
	u := b.Transport.URL()
	u.Path = path
	return u
}

// Route is where requests for one group/version go.
type Route struct {
	GroupVersion schema.GroupVersion
	// APIService is the name of the APIService the route comes from.
	APIService string
	// Local routes go to core, or, for groups core does not serve, to
	// crd: a local APIService is served by the control plane itself, as
	// kube's are by kube-apiserver or its apiextensions server.
	Local bool
	// Backend serves the group/version; nil when the APIService's
	// service cannot be resolved.
	Backend *Backend
	// Available is true for local routes and for the others when their
	// APIService's Available condition is True.
	Available            bool
	GroupPriorityMinimum int32
	VersionPriority      int32
}

// Options configure a Table.
type Options struct {
	// Core is the backend of local APIServices of core's groups.
	Core *Backend
	// CRD is the backend of the other local APIServices (custom resources
	// and apiextensions.k8s.io); nil sends them to core as well.
	CRD *Backend
	// Client reads and registers APIServices in core as the gateway.
	Client aggregator.Interface
	// Resolver finds the services of non-local APIServices.
	Resolver serviceresolver.Resolver
	// ClientCertificate is what the gateway presents to aggregated API
	// servers.
	ClientCertificate tls.Certificate
	// RetryInterval spaces attempts to register the built-in APIServices
	// while core is not reachable; 0 means one second.
	RetryInterval time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Tracing, when not nil, traces the requests forwarded to aggregated
	// API servers.
	Tracing *tracing.Provider
}

// Table is the routing table. Its methods are safe for concurrent use.
type Table struct {
	opts Options
	log  *slog.Logger

	mu       sync.RWMutex
	routes   map[schema.GroupVersion]Route
	backends map[string]*Backend // by backendKey, reused across rebuilds
	synced   bool
	subs     map[chan struct{}]struct{}
}

// New returns a table with no routes; Run fills it.
func New(o Options) (*Table, error) {
	var errs []error
	if o.Core == nil {
		errs = append(errs, errors.New("routing: a core backend is required"))
	}
	if o.Client == nil {
		errs = append(errs, errors.New("routing: an APIService client is required"))
	}
	if o.Resolver == nil {
		errs = append(errs, errors.New("routing: a service resolver is required"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Table{
		opts:     o,
		log:      log,
		routes:   map[schema.GroupVersion]Route{},
		backends: map[string]*Backend{},
		subs:     map[chan struct{}]struct{}{},
	}, nil
}

// Run registers the built-in APIServices, then follows every APIService
// until ctx ends.
func (t *Table) Run(ctx context.Context) error {
	for {
		err := EnsureBuiltins(ctx, t.opts.Client.ApiregistrationV1().APIServices(), t.opts.CRD != nil)
		if err == nil {
			break
		}
		t.log.Warn("register built-in apiservices", "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(t.opts.RetryInterval):
		}
	}
	factory := informers.NewSharedInformerFactory(t.opts.Client, 0)
	inf := factory.Apiregistration().V1().APIServices()
	lister := inf.Lister()
	rebuild := func(any) {
		list, err := lister.List(labels.Everything())
		if err != nil {
			t.log.Error("list apiservices", "err", err)
			return
		}
		t.rebuild(list)
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    rebuild,
		UpdateFunc: func(_, obj any) { rebuild(obj) },
		DeleteFunc: rebuild,
	}); err != nil {
		return fmt.Errorf("watch apiservices: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil
	}
	list, err := lister.List(labels.Everything())
	if err != nil {
		return fmt.Errorf("list apiservices: %w", err)
	}
	t.rebuild(list)
	t.mu.Lock()
	t.synced = true
	t.mu.Unlock()
	t.log.Info("routing table synced", "routes", len(list))
	<-ctx.Done()
	return nil
}

// Synced reports whether the table holds every APIService core stores.
func (t *Table) Synced() bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.synced
}

// Lookup returns the route of gv.
func (t *Table) Lookup(gv schema.GroupVersion) (Route, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.routes[gv]
	return r, ok
}

// Routes returns every route in kube's discovery order: groups by
// descending GroupPriorityMinimum then name, versions within a group by
// descending VersionPriority then kube's version order.
func (t *Table) Routes() []Route {
	t.mu.RLock()
	out := make([]Route, 0, len(t.routes))
	for _, r := range t.routes {
		out = append(out, r)
	}
	t.mu.RUnlock()
	groupPriority := map[string]int32{}
	for _, r := range out {
		groupPriority[r.GroupVersion.Group] = max(groupPriority[r.GroupVersion.Group], r.GroupPriorityMinimum)
	}
	slices.SortFunc(out, func(a, b Route) int {
		ga, gb := a.GroupVersion.Group, b.GroupVersion.Group
		if ga != gb {
			if pa, pb := groupPriority[ga], groupPriority[gb]; pa != pb {
				return int(pb - pa)
			}
			return strings.Compare(ga, gb)
		}
		if a.VersionPriority != b.VersionPriority {
			return int(b.VersionPriority - a.VersionPriority)
		}
		return -version.CompareKubeAwareVersionStrings(a.GroupVersion.Version, b.GroupVersion.Version)
	})
	return out
}

// Subscribe returns a channel that receives a value after the table
// changes (changes in a burst may be coalesced into one) and a function
// that ends the subscription.
func (t *Table) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	t.mu.Lock()
	t.subs[ch] = struct{}{}
	t.mu.Unlock()
	return ch, func() {
		t.mu.Lock()
		delete(t.subs, ch)
		t.mu.Unlock()
	}
}

func (t *Table) rebuild(list []*apiregistrationv1.APIService) {
	routes := make(map[schema.GroupVersion]Route, len(list))
	used := map[string]*Backend{}
	t.mu.RLock()
	old := t.backends
	t.mu.RUnlock()
	for _, s := range list {
		r := Route{
			GroupVersion:         schema.GroupVersion{Group: s.Spec.Group, Version: s.Spec.Version},
			APIService:           s.Name,
			Local:                s.Spec.Service == nil,
			GroupPriorityMinimum: s.Spec.GroupPriorityMinimum,
			VersionPriority:      s.Spec.VersionPriority,
		}
		if r.Local {
			r.Backend, r.Available = t.opts.Core, true
			if t.opts.CRD != nil && !coreServes(r.GroupVersion) {
				r.Backend = t.opts.CRD
			}
		} else {
			b, err := t.backend(s, old, used)
			if err != nil {
				t.log.Warn("apiservice backend", "apiservice", s.Name, "err", err)
			}
			r.Backend = b
			r.Available = b != nil && helper.IsAPIServiceConditionTrue(s, apiregistrationv1.Available)
		}
		routes[r.GroupVersion] = r
	}
	t.mu.Lock()
	t.routes, t.backends = routes, used
	for ch := range t.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
	for k, b := range old {
		if _, ok := used[k]; !ok {
			b.Transport.CloseIdleConnections()
		}
	}
}

// backend returns the backend of s's service, reusing the one of the
// previous table (and its connections) when nothing about it changed.
func (t *Table) backend(s *apiregistrationv1.APIService, old, used map[string]*Backend) (*Backend, error) {
	ref := s.Spec.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	u, err := t.opts.Resolver.ResolveEndpoint(ref.Namespace, ref.Name, port)
	if err != nil {
		return nil, fmt.Errorf("resolve service %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	sum := sha256.Sum256(s.Spec.CABundle)
	key := fmt.Sprintf("%s|%x|%t", u, sum, s.Spec.InsecureSkipTLSVerify)
	if b, ok := used[key]; ok {
		return b, nil
	}
	if b, ok := old[key]; ok {
		used[key] = b
		return b, nil
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{t.opts.ClientCertificate},
		// kube verifies an aggregated server's certificate for its
		// service's DNS name, whatever address it was reached at.
		ServerName:         ref.Name + "." + ref.Namespace + ".svc",
		InsecureSkipVerify: s.Spec.InsecureSkipTLSVerify, //nolint:gosec // the APIService asks for it
	}
	if len(bytes.TrimSpace(s.Spec.CABundle)) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(s.Spec.CABundle) {
			return nil, fmt.Errorf("spec.caBundle of %s holds no PEM certificate", s.Name)
		}
		cfg.RootCAs = pool
	}
	name := ref.Namespace + "/" + ref.Name
	tr, err := proxy.NewTransport([]*url.URL{u}, cfg, proxy.WithTracing(t.opts.Tracing, name))
	if err != nil {
		return nil, err
	}
	b := &Backend{Name: name, Transport: tr}
	used[key] = b
	return b, nil
}
