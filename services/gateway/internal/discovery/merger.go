package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
)

// Defaults of a Merger's timing: kube-aggregator's interval and timeout,
// and how often the backends' aggregated documents are asked whether they
// changed, so that a CRD's resources appear within a second.
const (
	DefaultInterval      = time.Minute
	DefaultTimeout       = 5 * time.Second
	DefaultCheckInterval = time.Second
)

// Option configures a Merger.
type Option func(*Merger)

// WithInterval sets how often documents are fetched again when no route
// changed.
func WithInterval(d time.Duration) Option { return func(m *Merger) { m.interval = d } }

// WithCheckInterval sets how often every backend that serves its
// aggregated documents with an ETag is asked, with If-None-Match, whether
// they changed; a change fetches everything again and calls the
// WithOnChange function. Kube serves its own CRDs' discovery from memory;
// this is what keeps the gateway as quick for crd's.
func WithCheckInterval(d time.Duration) Option { return func(m *Merger) { m.checkInterval = d } }

// WithOnChange sets what is called when a sync finds a backend's
// aggregated documents changed since the previous one, such as
// refreshing the OpenAPI documents too.
func WithOnChange(f func()) Option { return func(m *Merger) { m.onChange = f } }

// WithTimeout bounds one fetch from one backend.
func WithTimeout(d time.Duration) Option { return func(m *Merger) { m.timeout = d } }

// WithLogger sets where fetch failures are logged.
func WithLogger(l *slog.Logger) Option { return func(m *Merger) { m.log = l } }

// Merger merges the backends' discovery documents and serves the result.
type Merger struct {
	routes   Routes
	client   *http.Client
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	refresh  chan struct{}
	// checkInterval spaces the checks of the backends' ETags; onChange is
	// called when a sync meets a change.
	checkInterval time.Duration
	onChange      func()

	docs atomic.Pointer[documents]

	// mu serializes syncs, which own the caches below.
	mu sync.Mutex
	// core and apis are each backend's last aggregated documents of /api
	// and /apis, by backend URL.
	core, apis map[string]*aggregatedCache
}

// New returns a Merger of the documents of the routes' backends, reached
// with each route's client or, for routes without one, with client. It serves empty documents until
// its first sync.
func New(routes Routes, client *http.Client, opts ...Option) (*Merger, error) {
	m := &Merger{
		routes:        routes,
		client:        client,
		interval:      DefaultInterval,
		timeout:       DefaultTimeout,
		checkInterval: DefaultCheckInterval,
		log:           slog.New(slog.DiscardHandler),
		refresh:       make(chan struct{}, 1),
		core:          map[string]*aggregatedCache{},
		apis:          map[string]*aggregatedCache{},
	}
	for _, o := range opts {
		o(m)
	}
	if m.interval <= 0 || m.timeout <= 0 || m.checkInterval <= 0 {
		return nil, fmt.Errorf("discovery merger: intervals and timeout must be positive, got %s, %s and %s", m.interval, m.checkInterval, m.timeout)
	}
	d, err := build(nil)
	if err != nil {
		return nil, err
	}
	m.docs.Store(d)
	return m, nil
}

// Refresh asks Run to fetch the documents again soon; call it when routes
// change. It never blocks.
func (m *Merger) Refresh() {
	select {
	case m.refresh <- struct{}{}:
	default:
	}
}

// Run syncs at once, then on every Refresh and every interval, until ctx
// ends.
func (m *Merger) Run(ctx context.Context) error {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	check := time.NewTicker(m.checkInterval)
	defer check.Stop()
	var (
		retry  time.Duration
		missed map[schema.GroupVersion]bool
	)
	for {
		missing, err := m.syncAndReport(ctx)
		if err != nil {
			m.log.Error("merge discovery documents", "err", err)
		}
		// A route whose backend does not list its group-version yet is
		// most often a CRD's, registered a moment before crd accepted
		// its names; one whose resource list lacks a resource of the
		// aggregated document is a CRD's that crd establishes once this
		// gateway lists it. Either is asked again soon, backing off up
		// to the check interval, rather than only at the next check. A
		// route newly missed starts the backoff over; one its backend
		// never serves does not keep it going.
		fresh := false
		for gv := range missing {
			fresh = fresh || !missed[gv]
		}
		missed = missing
		switch {
		case len(missing) == 0:
			retry = 0
		case fresh:
			retry = firstMissingRetry
		default:
			retry *= 2
		}
		var soon <-chan time.Time
		if retry > 0 && retry < m.checkInterval {
			soon = time.After(retry)
		}
		if !m.wait(ctx, t.C, check.C, soon) {
			return nil
		}
	}
}

// firstMissingRetry is how soon a sync that missed a route's
// group-version is repeated.
const firstMissingRetry = 25 * time.Millisecond

// Sync fetches every available route's documents from its backend and
// serves their merge. A backend that fails is left out and logged; the
// error is only for documents that cannot be encoded.
func (m *Merger) Sync(ctx context.Context) error {
	_, err := m.syncAndReport(ctx)
	return err
}

// syncAndReport is Sync; it reports the routes' group-versions that a
// backend which answered left out or did not list whole.
func (m *Merger) syncAndReport(ctx context.Context) (map[schema.GroupVersion]bool, error) {
	changed, missing, err := m.sync(ctx)
	if changed && m.onChange != nil {
		m.onChange()
	}
	return missing, err
}

// sync is Sync under the lock; it reports whether a backend's aggregated
// documents differ from those of the previous sync, and the routes'
// group-versions a backend that answered left out. The check between
// syncs only says a sync is due: a sync that runs for another reason (the
// interval, a Refresh, Run's first) may be the one that meets the change,
// and the OpenAPI documents must follow it all the same. A group-version
// whose resource list lacks a resource that the aggregated document has
// is served as it is and reported too.
func (m *Merger) sync(ctx context.Context) (changed bool, missing map[schema.GroupVersion]bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()

	byBackend := map[string][]Route{}
	for _, r := range m.routes.Routes() {
		if r.Available && r.Backend != nil {
			key := r.Backend.String()
			byBackend[key] = append(byBackend[key], r)
		}
	}
	results := make(map[string]*backendDocuments, len(byBackend))
	var (
		wg      sync.WaitGroup
		resMu   sync.Mutex
		newCore = map[string]*aggregatedCache{}
		newApis = map[string]*aggregatedCache{}
	)
	for key, routes := range byBackend {
		wg.Add(1)
		go func() {
			defer wg.Done()
			core, apis, docs, err := m.fetchBackend(ctx, routes, m.core[key], m.apis[key])
			resMu.Lock()
			defer resMu.Unlock()
			if err != nil {
				m.log.Warn("fetch discovery from backend", "backend", key, "err", err)
				return
			}
			newCore[key], newApis[key], results[key] = core, apis, docs
			// fetch.aggregated keeps the cached value when the backend
			// answers 304, so a new value after an old one is a change.
			changed = changed || (m.core[key] != nil && core != m.core[key]) || (m.apis[key] != nil && apis != m.apis[key])
		}()
	}
	wg.Wait()
	m.core, m.apis = newCore, newApis

	var entries []entry
	for key, routes := range byBackend {
		docs := results[key]
		if docs == nil {
			continue
		}
		for _, r := range routes {
			gv := metav1.GroupVersion{Group: r.GroupVersion.Group, Version: r.GroupVersion.Version}
			v, ok := docs.aggregated[gv]
			legacy := docs.legacy[r.legacyPath()]
			served := ok && legacy != nil
			if !served || unlisted(v, legacy) {
				if missing == nil {
					missing = map[schema.GroupVersion]bool{}
				}
				missing[r.GroupVersion] = true
			}
			if served {
				entries = append(entries, entry{route: r, aggregated: v, legacy: legacy})
			}
		}
	}
	d, err := build(entries)
	if err != nil {
		return changed, missing, err
	}
	m.docs.Store(d)
	return changed, missing, nil
}

// unlisted reports whether the aggregated document v lists a resource
// that the group-version's resource list legacy leaves out. crd lists a
// CRD's resources in the aggregated document as soon as their names are
// accepted, and in the resource list only once the CRD is established,
// which it is once this gateway's aggregated document lists them.
func unlisted(v apidiscoveryv2.APIVersionDiscovery, legacy []byte) bool {
	var list metav1.APIResourceList
	if err := json.Unmarshal(legacy, &list); err != nil {
		return false
	}
	for _, r := range v.Resources {
		if !slices.ContainsFunc(list.APIResources, func(a metav1.APIResource) bool { return a.Name == r.Resource }) {
			return true
		}
	}
	return false
}

// fetchBackend reads the aggregated documents a backend's routes need and
// each route's resource list. A backend whose aggregated documents cannot
// be read is down as a whole.
func (m *Merger) fetchBackend(ctx context.Context, routes []Route, core, apis *aggregatedCache) (*aggregatedCache, *aggregatedCache, *backendDocuments, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	backend := routes[0].Backend
	fetch := fetcher{client: routes[0].client(m.client)}
	var needCore, needApis bool
	for _, r := range routes {
		needCore = needCore || r.GroupVersion.Group == ""
		needApis = needApis || r.GroupVersion.Group != ""
	}
	docs := &backendDocuments{aggregated: map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery{}, legacy: map[string][]byte{}}
	var err error
	if needCore {
		if core, err = fetch.aggregated(ctx, backend, "/api", core); err != nil {
			return nil, nil, nil, err
		}
		for gv, v := range core.versions {
			docs.aggregated[gv] = v
		}
	}
	if needApis {
		if apis, err = fetch.aggregated(ctx, backend, "/apis", apis); err != nil {
			return nil, nil, nil, err
		}
		for gv, v := range apis.versions {
			docs.aggregated[gv] = v
		}
	}
	// The resource lists are read side by side: one after another, core's
	// two dozen would hold a new CRD's group out of discovery for a few
	// hundred milliseconds.
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		slots = make(chan struct{}, legacyFetches)
	)
	for _, r := range routes {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			b, err := fetch.legacy(ctx, r)
			if err != nil {
				// One group-version the backend does not serve leaves
				// only itself out.
				m.log.Warn("fetch resource list from backend", "backend", backend.String(), "groupVersion", r.GroupVersion.String(), "err", err)
				return
			}
			mu.Lock()
			docs.legacy[r.legacyPath()] = b
			mu.Unlock()
		}()
	}
	wg.Wait()
	return core, apis, docs, nil
}

// legacyFetches bounds the resource lists read from one backend at once.
const legacyFetches = 8

// wait returns when the next sync is due: at the interval, on Refresh, at
// soon (nil for never), or when a check finds a backend's documents
// changed; false when ctx ends.
func (m *Merger) wait(ctx context.Context, interval, check, soon <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-interval:
			return true
		case <-soon:
			return true
		case <-m.refresh:
			return true
		case <-check:
			if m.changed(ctx) {
				return true
			}
		}
	}
}

// changed asks every backend whose aggregated documents came with an ETag
// whether they are still the same; an error counts as no change, the
// next sync finds out.
func (m *Merger) changed(ctx context.Context) bool {
	m.mu.Lock()
	type check struct {
		backend *url.URL
		client  *http.Client
		path    string
		etag    string
	}
	var checks []check
	clients := map[string]*http.Client{}
	for _, r := range m.routes.Routes() {
		if r.Backend != nil {
			clients[r.Backend.String()] = r.client(m.client)
		}
	}
	for path, caches := range map[string]map[string]*aggregatedCache{"/api": m.core, "/apis": m.apis} {
		for key, c := range caches {
			client, ok := clients[key]
			if c == nil || c.etag == "" || !ok {
				continue
			}
			u, err := url.Parse(key)
			if err != nil {
				continue
			}
			checks = append(checks, check{backend: u, client: client, path: path, etag: c.etag})
		}
	}
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	for _, c := range checks {
		body, _, err := fetcher{client: c.client}.get(ctx, c.backend, c.path, libdiscovery.MediaTypeV2, c.etag)
		if err == nil && body != nil {
			return true
		}
	}
	return false
}
