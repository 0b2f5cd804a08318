package openapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/resource"
)

// Paths the documents are served at.
const (
	PathV2 = "/openapi/v2"
	PathV3 = "/openapi/v3"
)

// Router is where the handlers are mounted: *echo.Echo, or an *echo.Group
// without a prefix (kube-openapi's handlers read the request path as
// /openapi/v3/<group-version>).
type Router interface {
	GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// Option configures a Set.
type Option func(*spec.Info)

// WithVersion sets the version the documents' info names, as
// kube-apiserver names its own (v1.32.0); the default is "unversioned".
func WithVersion(version string) Option {
	return func(info *spec.Info) { info.Version = version }
}

// Set serves the OpenAPI documents of a set of resources that can be
// replaced at run time. Documents are built once per replacement; their
// encodings and hashes are computed on first request and kept.
type Set struct {
	info *spec.Info
	v2   *handler.OpenAPIService
	v3   *handler3.OpenAPIService

	// mu serializes replacements, so the v2 and v3 services end with the
	// documents of the same, last one.
	mu         sync.Mutex
	generation uint64
	// served is the set of v3 group-version keys being served.
	served atomic.Pointer[map[string]bool]
}

// NewSet returns a Set serving the given resources.
func NewSet(resources []*resource.Resource, opts ...Option) (*Set, error) {
	info := &spec.Info{InfoProps: spec.InfoProps{Title: "Kubernetes", Version: "unversioned"}}
	for _, o := range opts {
		o(info)
	}
	d, err := build(resources, info)
	if err != nil {
		return nil, fmt.Errorf("build OpenAPI documents: %w", err)
	}
	s := &Set{info: info, v2: handler.NewOpenAPIService(d.v2), v3: handler3.NewOpenAPIService()}
	s.install(d)
	return s, nil
}

// Replace makes the Set serve exactly the given resources from now on. On
// error the Set keeps serving what it served.
func (s *Set) Replace(resources []*resource.Resource) error {
	d, err := build(resources, s.info)
	if err != nil {
		return fmt.Errorf("build OpenAPI documents: %w", err)
	}
	s.install(d)
	return nil
}

// install serves d. The v2 document is encoded on its next request; the
// generation tells kube-openapi's cache that it changed.
func (s *Set) install(d *documents) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.generation++
	s.v2.UpdateSpecLazy(cached.Static(d.v2, strconv.FormatUint(s.generation, 10)))
	served := make(map[string]bool, len(d.v3))
	for key, doc := range d.v3 {
		s.v3.UpdateGroupVersion(key, doc)
		served[key] = true
	}
	if old := s.served.Load(); old != nil {
		for key := range *old {
			if !served[key] {
				s.v3.DeleteGroupVersion(key)
			}
		}
	}
	s.served.Store(&served)
}

// Register mounts /openapi/v2, /openapi/v3 and /openapi/v3/<group-version>
// on r.
func (s *Set) Register(r Router) {
	s.v2.RegisterOpenAPIVersionedService(PathV2, pathHandler{r})
	r.GET(PathV3, echo.WrapHandler(http.HandlerFunc(s.v3.HandleDiscovery)))
	r.GET(PathV3+"/*", s.serveGroupVersion)
}

// serveGroupVersion answers an unknown group-version with kube's 404
// Status; kube-openapi's handler would answer an empty 200.
func (s *Set) serveGroupVersion(c echo.Context) error {
	key := strings.TrimPrefix(c.Request().URL.Path, PathV3+"/")
	if !(*s.served.Load())[key] {
		return apistatus.Write(c, echo.ErrNotFound)
	}
	s.v3.HandleGroupVersion(c.Response(), c.Request())
	return nil
}

// pathHandler mounts kube-openapi's handlers on echo.
type pathHandler struct{ r Router }

func (p pathHandler) Handle(path string, h http.Handler) {
	p.r.GET(path, echo.WrapHandler(h))
}
