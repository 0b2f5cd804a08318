package openapi

import (
	"cmp"
	"context"
	"crypto/sha512"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/discovery"
)

// Paths the documents are served at.
const (
	PathV2 = "/openapi/v2"
	PathV3 = "/openapi/v3"
)

// Defaults of a Merger's timing.
const (
	DefaultInterval = time.Minute
	DefaultTimeout  = 10 * time.Second
)

// maxDocumentBytes bounds what is read of one backend document.
const maxDocumentBytes = 256 << 20

// Option configures a Merger.
type Option func(*Merger)

// WithInterval sets how often documents are fetched again when no route
// changed.
func WithInterval(d time.Duration) Option { return func(m *Merger) { m.interval = d } }

// WithTimeout bounds the fetch of one backend's documents.
func WithTimeout(d time.Duration) Option { return func(m *Merger) { m.timeout = d } }

// WithLogger sets where fetch failures are logged.
func WithLogger(l *slog.Logger) Option { return func(m *Merger) { m.log = l } }

// WithVersion sets the version the merged v2 document's info names.
func WithVersion(v string) Option { return func(m *Merger) { m.version = v } }

// Merger merges the backends' OpenAPI documents and serves the result.
type Merger struct {
	routes   discovery.Routes
	client   *http.Client
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	version  string
	refresh  chan struct{}

	index atomic.Pointer[index]
	v2    *handler.OpenAPIService

	// mu serializes syncs, which own generation.
	mu         sync.Mutex
	generation uint64
}

// index is the merged /openapi/v3 index: the owner of every listed
// group-version and the encoded document.
type index struct {
	owners  map[string]discovery.Route
	encoded []byte
	etag    string
}

// New returns a Merger of the documents of the routes' backends, reached
// with each route's client or, for routes without one, with client. It serves empty documents until
// its first sync.
func New(routes discovery.Routes, client *http.Client, opts ...Option) (*Merger, error) {
	m := &Merger{
		routes:   routes,
		client:   client,
		interval: DefaultInterval,
		timeout:  DefaultTimeout,
		log:      slog.New(slog.DiscardHandler),
		version:  "unversioned",
		refresh:  make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(m)
	}
	if m.interval <= 0 || m.timeout <= 0 {
		return nil, fmt.Errorf("openapi merger: interval and timeout must be positive, got %s and %s", m.interval, m.timeout)
	}
	m.v2 = handler.NewOpenAPIService(m.swagger())
	if err := m.install(map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}, map[string]discovery.Route{}, m.swagger()); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *Merger) swagger() *spec.Swagger {
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: m.version}},
		Paths:       &spec.Paths{Paths: map[string]spec.PathItem{}},
		Definitions: spec.Definitions{},
	}}
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
	for {
		if err := m.Sync(ctx); err != nil {
			m.log.Error("merge openapi documents", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-m.refresh:
		}
	}
}

// backendDocuments are one backend's v3 index and v2 document.
type backendDocuments struct {
	index map[string]handler3.OpenAPIV3DiscoveryGroupVersion
	v2    *spec.Swagger
}

// Sync fetches the documents of every backend that owns an available
// route and serves their merge. A backend that fails is left out and
// logged; the error is only for documents that cannot be encoded.
func (m *Merger) Sync(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()

	byBackend := map[string][]discovery.Route{}
	for _, r := range m.routes.Routes() {
		if r.Available && r.Backend != nil {
			key := r.Backend.String()
			byBackend[key] = append(byBackend[key], r)
		}
	}
	var (
		wg      sync.WaitGroup
		resMu   sync.Mutex
		results = map[string]*backendDocuments{}
	)
	for key, routes := range byBackend {
		wg.Add(1)
		go func() {
			defer wg.Done()
			docs, err := m.fetchBackend(ctx, routes[0])
			resMu.Lock()
			defer resMu.Unlock()
			if err != nil {
				m.log.Warn("fetch openapi from backend", "backend", key, "err", err)
				return
			}
			results[key] = docs
		}()
	}
	wg.Wait()

	paths := map[string]handler3.OpenAPIV3DiscoveryGroupVersion{}
	owners := map[string]discovery.Route{}
	v2 := m.swagger()
	for _, key := range mergeOrder(byBackend) {
		docs := results[key]
		if docs == nil {
			continue
		}
		var prefixes []string
		for _, r := range byBackend[key] {
			p := gvPath(r)
			entry, ok := docs.index[p]
			if !ok {
				continue
			}
			paths[p], owners[p] = entry, r
			prefixes = append(prefixes, "/"+p+"/")
		}
		// As kube-aggregator: a backend's paths outside its routes are
		// another's (or no one's), and so are the definitions only they
		// use. Same-named definitions that differ are renamed, their
		// references with them, rather than one backend's breaking
		// another's paths; equal ones are kept once.
		own := aggregator.FilterSpecByPathsWithoutSideEffects(docs.v2, prefixes)
		if err := aggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(v2, own); err != nil {
			// Only a malformed x-kubernetes-group-version-kind fails a
			// merge, before any path is added: the backend's paths are
			// left out as if it were down (definitions it added are
			// unreferenced), where kube would fail every backend's.
			m.log.Warn("merge openapi v2 of backend", "backend", key, "err", err)
		}
	}
	return m.install(paths, owners, v2)
}

// gvPath is the key of a route's group-version in the v3 index.
func gvPath(r discovery.Route) string {
	if r.GroupVersion.Group == "" {
		return "api/" + r.GroupVersion.Version
	}
	return "apis/" + r.GroupVersion.Group + "/" + r.GroupVersion.Version
}

// mergeOrder is the order backends are merged in, which decides which of
// two different definitions of one name keeps it: kube's order of
// APIServices, the highest groupPriorityMinimum of a backend's routes
// first, then the backend's URL, so that the name goes to the same
// backend on every sync.
func mergeOrder(byBackend map[string][]discovery.Route) []string {
	priority := map[string]int32{}
	for key, routes := range byBackend {
		for _, r := range routes {
			priority[key] = max(priority[key], r.GroupPriorityMinimum)
		}
	}
	keys := slices.Collect(maps.Keys(byBackend))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(priority[b], priority[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	return keys
}

func (m *Merger) install(paths map[string]handler3.OpenAPIV3DiscoveryGroupVersion, owners map[string]discovery.Route, v2 *spec.Swagger) error {
	encoded, err := json.Marshal(handler3.OpenAPIV3Discovery{Paths: paths})
	if err != nil {
		return fmt.Errorf("encode openapi v3 index: %w", err)
	}
	m.index.Store(&index{owners: owners, encoded: encoded, etag: fmt.Sprintf("%X", sha512.Sum512(encoded))})
	m.generation++
	m.v2.UpdateSpecLazy(cached.Static(v2, strconv.FormatUint(m.generation, 10)))
	return nil
}

// fetchBackend reads a backend's v3 index and v2 document.
func (m *Merger) fetchBackend(ctx context.Context, r discovery.Route) (*backendDocuments, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	docs := &backendDocuments{}
	var idx handler3.OpenAPIV3Discovery
	client := m.client
	if r.Client != nil {
		client = r.Client
	}
	if err := getJSON(ctx, client, r.Backend, PathV3, &idx); err != nil {
		return nil, err
	}
	docs.index = idx.Paths
	docs.v2 = &spec.Swagger{}
	if err := getJSON(ctx, client, r.Backend, PathV2, docs.v2); err != nil {
		return nil, err
	}
	return docs, nil
}

func getJSON(ctx context.Context, client *http.Client, backend *url.URL, path string, into any) error {
	u := backend.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("build request for %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	setIdentity(req.Header)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return fmt.Errorf("read %s: %w", u, err)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("decode %s: %w", u, err)
	}
	return nil
}

// setIdentity makes a request to a backend as the aggregator makes it, so
// a backend's authorization never hides part of the API.
func setIdentity(h http.Header) {
	h.Set(frontproxy.UserHeader, "system:kube-aggregator")
	h.Set(frontproxy.GroupHeader, "system:masters")
}
