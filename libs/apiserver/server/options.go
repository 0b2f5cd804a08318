package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/libs/apiserver/openapi"
	"kplane.dev/libs/apiserver/resource"
	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// DefaultMaxRequestBodyBytes is kube-apiserver's limit on a request body.
const DefaultMaxRequestBodyBytes = 3 << 20

// StoreFunc builds the store of one resource and the keys it lives under.
// A store with a Run(ctx) method (a watch cache) is run by the server for
// as long as the resource is served.
type StoreFunc func(r *resource.Resource) (storage.Interface, storage.Keys, error)

// Routes mounts endpoints besides the resources and their discovery and
// OpenAPI documents, such as health checks, on paths outside /api and
// /apis. Routes mounted on exact paths win over the catch-all route.
type Routes interface {
	Register(e *echo.Echo)
}

// RoutesFunc adapts a function to Routes.
type RoutesFunc func(e *echo.Echo)

// Register calls f(e).
func (f RoutesFunc) Register(e *echo.Echo) { f(e) }

// Options are the settings of a Server.
type Options struct {
	// Resources are served from the start; Server.Replace changes them.
	Resources []*resource.Resource
	// Stores builds each resource's store.
	Stores StoreFunc
	// Routes are mounted besides the resources.
	Routes []Routes
	// OpenAPIOptions configure the OpenAPI documents (their version).
	OpenAPIOptions []openapi.Option
	// MaxRequestBodyBytes refuses larger bodies with 413; 0 means
	// DefaultMaxRequestBodyBytes.
	MaxRequestBodyBytes int64
	// HandlerOptions apply to every resource's handler.
	HandlerOptions []rest.Option
	// Missing, when set, is asked about a request for a resource the
	// server does not serve before it answers 404. It may bring the
	// server up to date (a CRD established through another replica
	// moments ago) and return true to have the resource looked up again,
	// or return the error to answer instead (503 with Retry-After while
	// the server has not yet learnt what it serves).
	Missing func(ctx context.Context, gvr schema.GroupVersionResource) (bool, error)
	// Logger receives what the server cannot tell a client; nil discards.
	Logger *slog.Logger
}

// Validate reports every problem with o.
func (o *Options) Validate() []error {
	var errs []error
	if o.Stores == nil {
		errs = append(errs, errors.New("stores: a StoreFunc is required"))
	}
	if o.MaxRequestBodyBytes < 0 {
		errs = append(errs, fmt.Errorf("max request body bytes: must not be negative, got %d", o.MaxRequestBodyBytes))
	}
	if err := validateResources(o.Resources); err != nil {
		errs = append(errs, err)
	}
	return errs
}

func validateResources(resources []*resource.Resource) error {
	seen := map[schema.GroupVersionResource]bool{}
	for i, r := range resources {
		switch {
		case r == nil:
			return fmt.Errorf("resources[%d]: nil", i)
		case r.GroupVersionResource.Version == "" || r.GroupVersionResource.Resource == "":
			return fmt.Errorf("resources[%d]: version and resource are required, got %s", i, r.GroupVersionResource)
		case r.Objects == nil:
			return fmt.Errorf("resources[%d] %s: Objects is required", i, r.GroupVersionResource)
		case seen[r.GroupVersionResource]:
			return fmt.Errorf("resources[%d]: %s is declared twice", i, r.GroupVersionResource)
		}
		seen[r.GroupVersionResource] = true
	}
	return nil
}

// Config is a validated Options; only Config builds a Server.
type Config struct {
	opts Options
}

// Config validates o and returns the configuration it describes.
func (o *Options) Config() (*Config, error) {
	if errs := o.Validate(); len(errs) > 0 {
		return nil, fmt.Errorf("invalid server options: %w", errors.Join(errs...))
	}
	c := &Config{opts: *o}
	c.opts.Resources = append([]*resource.Resource(nil), o.Resources...)
	if c.opts.MaxRequestBodyBytes == 0 {
		c.opts.MaxRequestBodyBytes = DefaultMaxRequestBodyBytes
	}
	if c.opts.Logger == nil {
		c.opts.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
