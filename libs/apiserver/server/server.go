package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/apiserver/openapi"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// runner is a store that must run to serve, such as a watch cache.
type runner interface {
	Run(ctx context.Context)
}

// Server serves the resources of one storage service.
type Server struct {
	opts Options
	log  *slog.Logger
	echo *echo.Echo
	// docs routes the requests that are not for resources: discovery and
	// OpenAPI.
	docs *echo.Echo

	// table maps each served resource to its backend; requests read it
	// without locking, Replace swaps in a new map.
	table atomic.Pointer[map[schema.GroupVersionResource]*backend]
	// discovery and openapi serve the documents of the resources in table.
	discovery *discovery.Set
	openapi   *openapi.Set

	// mu serializes Replace with Run's start and end; it guards runCtx,
	// running and served.
	mu sync.Mutex
	// served are the resources the table and the documents were last
	// built from.
	served  []*resource.Resource
	runCtx  context.Context
	running bool
	// runners counts the goroutines running stores; Run waits for them.
	runners sync.WaitGroup

	// stopWatches ends every watch when the server shuts down, which
	// otherwise would hold connections open for up to an hour.
	watchCtx    context.Context
	stopWatches context.CancelFunc
}

// backend is one served resource: its handler, its store and, for a store
// that runs, the means to stop it.
type backend struct {
	r     *resource.Resource
	h     *rest.Handler
	store storage.Interface
	keys  storage.Keys
	// stop ends the store's Run and waits for it; nil until it runs.
	stop func()
}

// New builds the server of cfg: a store and a handler for every resource.
// Stores that run start with Run.
func New(cfg *Config) (*Server, error) {
	s := &Server{opts: cfg.opts, log: cfg.opts.Logger}
	s.watchCtx, s.stopWatches = context.WithCancel(context.Background())
	empty := map[schema.GroupVersionResource]*backend{}
	s.table.Store(&empty)
	var err error
	if s.discovery, err = discovery.NewSet(nil); err != nil {
		return nil, fmt.Errorf("build discovery: %w", err)
	}
	if s.openapi, err = openapi.NewSet(nil, cfg.opts.OpenAPIOptions...); err != nil {
		return nil, fmt.Errorf("build openapi: %w", err)
	}
	if err := s.Replace(cfg.opts.Resources); err != nil {
		return nil, err
	}

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = apistatus.HTTPErrorHandler
	e.Use(s.recoverPanics)
	// The documents get a router of their own: echo does not fall back
	// from /api/:version to the catch-all for /api/v1/configmaps.
	docs := echo.New()
	docs.HTTPErrorHandler = apistatus.HTTPErrorHandler
	s.discovery.Register(docs)
	s.openapi.Register(docs)
	s.docs = docs
	for _, r := range cfg.opts.Routes {
		r.Register(e)
	}
	e.Any("/*", s.serveResource)
	s.echo = e
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Replace makes the server serve exactly resources, and their discovery
// and OpenAPI documents, from now on. A resource already served keeps its
// store (and watch cache) and gets a handler for its new declaration; a
// new one gets a store, started if the server runs; a dropped one's store
// is stopped, and so is the store of one whose StoreGeneration changed,
// which gets a new one. On error the server keeps serving what it served.
func (s *Server) Replace(resources []*resource.Resource) error {
	if err := validateResources(resources); err != nil {
		return fmt.Errorf("replace resources: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := *s.table.Load()
	next := make(map[schema.GroupVersionResource]*backend, len(resources))
	var started []*backend
	for _, r := range resources {
		gvr := r.GroupVersionResource
		if prev, ok := old[gvr]; ok && prev.r == r {
			// The same declaration: its handler (and the patcher it
			// built from the schema) serves on, as a CRD's resources do
			// when another CRD changes.
			next[gvr] = prev
			continue
		}
		b := &backend{r: r}
		if prev, ok := old[gvr]; ok && prev.r.StoreGeneration == r.StoreGeneration {
			b.store, b.keys, b.stop = prev.store, prev.keys, prev.stop
		} else if r.Stored() {
			store, keys, err := s.opts.Stores(r)
			if err != nil {
				s.stopAll(started)
				return fmt.Errorf("build store of %s: %w", gvr, err)
			}
			b.store, b.keys = store, keys
			if s.running {
				s.start(b)
				started = append(started, b)
			}
		}
		h, err := rest.New(r, b.store, b.keys, append([]rest.Option{rest.WithLogger(s.log)}, s.opts.HandlerOptions...)...)
		if err != nil {
			s.stopAll(started)
			return fmt.Errorf("build handler of %s: %w", gvr, err)
		}
		b.h = h
		next[gvr] = b
	}
	if err := s.replaceDocuments(resources); err != nil {
		s.stopAll(started)
		return err
	}
	s.served = append([]*resource.Resource(nil), resources...)
	s.table.Store(&next)
	var dropped []*backend
	for gvr, b := range old {
		if n, ok := next[gvr]; !ok || n.r.StoreGeneration != b.r.StoreGeneration {
			dropped = append(dropped, b)
		}
	}
	s.stopAll(dropped)
	return nil
}

// replaceDocuments rebuilds the discovery and OpenAPI documents, or keeps
// both as they were. Callers hold s.mu.
func (s *Server) replaceDocuments(resources []*resource.Resource) error {
	if err := s.discovery.Replace(resources); err != nil {
		return err
	}
	if err := s.openapi.Replace(resources); err != nil {
		if rerr := s.discovery.Replace(s.served); rerr != nil {
			return errors.Join(err, fmt.Errorf("restore discovery: %w", rerr))
		}
		return err
	}
	return nil
}

// start runs b's store, if it runs, until the server stops or b is
// dropped. Callers hold s.mu.
func (s *Server) start(b *backend) {
	r, ok := b.store.(runner)
	if !ok {
		return
	}
	ctx, cancel := context.WithCancel(s.runCtx)
	done := make(chan struct{})
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		defer close(done)
		r.Run(ctx)
	}()
	b.stop = func() {
		cancel()
		<-done
	}
}

func (s *Server) stopAll(backends []*backend) {
	for _, b := range backends {
		if b.stop != nil {
			b.stop()
		}
	}
}

// Run runs the stores that need running until ctx ends, then ends every
// watch and waits for the stores to stop. Serving HTTP is the caller's,
// through Handler.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	if s.running || s.runCtx != nil {
		s.mu.Unlock()
		return errors.New("run server: already run")
	}
	s.running, s.runCtx = true, ctx
	for _, b := range *s.table.Load() {
		s.start(b)
	}
	s.mu.Unlock()

	<-ctx.Done()
	s.stopWatches()
	s.mu.Lock()
	s.running = false
	s.mu.Unlock()
	s.runners.Wait()
	return nil
}

// serveResource routes a request to the handler of its resource, or to
// the documents when it is not for a resource.
func (s *Server) serveResource(c echo.Context) error {
	req := c.Request()
	info := requestinfo.Parse(req.Method, req.URL)
	if !info.IsResourceRequest {
		s.docs.ServeHTTP(c.Response(), req)
		return nil
	}
	b := (*s.table.Load())[info.GroupVersionResource()]
	if b == nil && s.opts.Missing != nil {
		found, err := s.opts.Missing(req.Context(), info.GroupVersionResource())
		if err != nil {
			return err
		}
		if found {
			b = (*s.table.Load())[info.GroupVersionResource()]
		}
	}
	if b == nil {
		return echo.ErrNotFound
	}
	describeSpan(req.Context(), info)
	if err := s.readBody(c); err != nil {
		return err
	}
	if info.Verb == "watch" {
		ctx, cancel := context.WithCancel(req.Context())
		defer cancel()
		defer context.AfterFunc(s.watchCtx, cancel)()
		c.SetRequest(req.WithContext(ctx))
	}
	return b.h.Serve(c, info)
}

// readBody reads the request body into memory, refusing one over the
// limit with kube's 413 whether or not it declared its length.
func (s *Server) readBody(c echo.Context) error {
	req := c.Request()
	if req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0 {
		return nil
	}
	limit := s.opts.MaxRequestBodyBytes
	tooLarge := apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", limit))
	if req.ContentLength > limit {
		return tooLarge
	}
	var (
		data []byte
		err  error
	)
	if req.ContentLength > 0 {
		// The length is known (and within the limit): one buffer of
		// it, where ReadAll grows one from 512 bytes, copying as it
		// goes, and ends with room to spare.
		data = make([]byte, req.ContentLength)
		_, err = io.ReadFull(req.Body, data)
	} else {
		data, err = io.ReadAll(io.LimitReader(req.Body, limit+1))
	}
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("read request body: %v", err))
	}
	if int64(len(data)) > limit {
		return tooLarge
	}
	req.Body = &wholeBody{Reader: bytes.NewReader(data), data: data}
	req.ContentLength = int64(len(data))
	return nil
}

// wholeBody is a request body read whole, which the resource handlers
// take as it is instead of reading it into a buffer of their own (rest's
// readBody looks for ReadRest): reading it again was 6% of what core
// allocates for a create.
type wholeBody struct {
	*bytes.Reader
	data []byte
}

func (*wholeBody) Close() error { return nil }

// ReadRest returns what is left to read of the body, and reads it.
func (b *wholeBody) ReadRest() []byte {
	rest := b.data[len(b.data)-b.Len():]
	_, _ = b.Seek(0, io.SeekEnd)
	return rest
}

// panicMessage is kube-apiserver's answer to a request that panicked.
const panicMessage = "This request caused apiserver to panic. Look in the logs for details."

// recoverPanics turns a handler's panic into a 500 Status and a log line,
// except http.ErrAbortHandler, which aborts the response as intended.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			p := recover()
			if p == nil {
				return
			}
			if p == http.ErrAbortHandler {
				panic(p)
			}
			req := c.Request()
			s.log.Error("request panicked", "method", req.Method, "path", req.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = apierrors.NewInternalError(errors.New(panicMessage))
		}()
		return next(c)
	}
}

// describeSpan says which resource the request's server span, which the
// service's tracing handler started (named requestinfo.SpanName), acts
// on.
func describeSpan(ctx context.Context, info *requestinfo.Info) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	resource := info.Resource
	if info.Subresource != "" {
		resource += "/" + info.Subresource
	}
	span.SetAttributes(
		attribute.String("kplane.request.verb", info.Verb),
		attribute.String("kplane.request.group", info.APIGroup),
		attribute.String("kplane.request.version", info.APIVersion),
		attribute.String("kplane.request.resource", resource),
		semconv.K8SNamespaceName(info.Namespace),
	)
}
