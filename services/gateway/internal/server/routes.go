package server

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"

	"kplane.dev/services/gateway/internal/availability"
	"kplane.dev/services/gateway/internal/discovery"
	"kplane.dev/services/gateway/internal/routing"
)

// routes shows the routing table as the discovery and OpenAPI mergers
// read it: each route with its backend's URL and a client of the
// backend's own transport (its own TLS: core's CA, or an APIService's
// caBundle and server name, and the gateway's client certificate). The
// mergers set the identity they fetch as themselves.
type routes struct{ table *routing.Table }

var _ discovery.Routes = routes{}

func (r routes) Routes() []discovery.Route {
	rs := r.table.Routes()
	out := make([]discovery.Route, 0, len(rs))
	for _, rt := range rs {
		d := discovery.Route{
			GroupVersion:         rt.GroupVersion,
			APIService:           rt.APIService,
			GroupPriorityMinimum: rt.GroupPriorityMinimum,
			VersionPriority:      rt.VersionPriority,
			Available:            rt.Available,
		}
		if rt.Backend != nil {
			d.Backend = rt.Backend.URL("")
			// No client timeout: the mergers bound their fetches, and the
			// timeout filter bounds the requests they proxy.
			d.Client = rt.Backend.Client(0)
		}
		out = append(out, d)
	}
	return out
}

// endpoints resolves APIServices for the availability controller from the
// routing table: the route's backend, core for a local one not yet routed.
type endpoints struct {
	table *routing.Table
	core  *routing.Backend
}

var _ availability.Resolver = endpoints{}

func (e endpoints) Resolve(_ context.Context, s *apiregistrationv1.APIService) (availability.Endpoint, error) {
	if s.Spec.Service == nil {
		// A local APIService is served by core or, for the groups core
		// does not serve, crd: the route says which.
		if rt, ok := e.table.Lookup(schema.GroupVersion{Group: s.Spec.Group, Version: s.Spec.Version}); ok && rt.Local && rt.Backend != nil {
			return endpoint(rt.Backend), nil
		}
		return endpoint(e.core), nil
	}
	rt, ok := e.table.Lookup(schema.GroupVersion{Group: s.Spec.Group, Version: s.Spec.Version})
	if !ok || rt.APIService != s.Name || rt.Local {
		// The table follows APIServices through a watch and has not seen
		// this one yet; the route change triggers another probe.
		return availability.Endpoint{}, fmt.Errorf("apiservice %s is not routed yet", s.Name)
	}
	if rt.Backend == nil {
		// The resolver did not find the service.
		return availability.Endpoint{}, fmt.Errorf("resolve service %s/%s: %w", s.Spec.Service.Namespace, s.Spec.Service.Name, availability.ErrServiceNotFound)
	}
	return endpoint(rt.Backend), nil
}

func endpoint(b *routing.Backend) availability.Endpoint {
	// No client timeout: the controller bounds each probe.
	return availability.Endpoint{URL: b.URL(""), Client: b.Client(0)}
}
