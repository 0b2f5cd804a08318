package discovery

import (
	"net/http"
	"net/url"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Route is one routed group-version: who serves it and how it ranks.
type Route struct {
	GroupVersion schema.GroupVersion
	// APIService is the name of the APIService that registered the route
	// ("v1.apps"); kube orders groups of equal priority by it.
	APIService string
	// GroupPriorityMinimum and VersionPriority are the APIService's.
	GroupPriorityMinimum, VersionPriority int32
	// Available is the APIService's Available condition.
	Available bool
	// Backend is the base URL of the server that serves the group-version.
	Backend *url.URL
	// Client reaches Backend (its transport, CA bundle and the gateway's
	// client certificate); nil means the client the merger was built with.
	Client *http.Client
}

// Routes is the routing table the documents are merged from.
type Routes interface {
	Routes() []Route
}

// apiServiceName is the route's APIService name, or the one kube would
// give it.
func (r Route) apiServiceName() string {
	if r.APIService != "" {
		return r.APIService
	}
	return r.GroupVersion.Version + "." + r.GroupVersion.Group
}

// legacyPath is where the route's resource list is served.
func (r Route) legacyPath() string {
	if r.GroupVersion.Group == "" {
		return "/api/" + r.GroupVersion.Version
	}
	return "/apis/" + r.GroupVersion.Group + "/" + r.GroupVersion.Version
}

// client is the route's client, or fallback.
func (r Route) client(fallback *http.Client) *http.Client {
	if r.Client != nil {
		return r.Client
	}
	return fallback
}
