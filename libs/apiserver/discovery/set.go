package discovery

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/labstack/echo/v4"
	"github.com/munnerz/goautoneg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/resource"
)

// Media types of the aggregated discovery document, as clients ask for it
// and as the response names it.
const (
	MediaTypeV2      = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	MediaTypeV2Beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
)

// Router is where the handlers are mounted: *echo.Echo and *echo.Group
// both are one.
type Router interface {
	GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// Set serves the discovery documents of a set of resources that can be
// replaced at run time. Readers never block: a replacement builds new
// documents and swaps them in at once.
type Set struct {
	docs atomic.Pointer[documents]
}

// NewSet returns a Set serving the given resources.
func NewSet(resources []*resource.Resource) (*Set, error) {
	s := &Set{}
	if err := s.Replace(resources); err != nil {
		return nil, err
	}
	return s, nil
}

// Replace makes the Set serve exactly the given resources from now on.
func (s *Set) Replace(resources []*resource.Resource) error {
	d, err := build(resources)
	if err != nil {
		return fmt.Errorf("build discovery documents: %w", err)
	}
	s.docs.Store(d)
	return nil
}

// Register mounts the discovery endpoints on r.
func (s *Set) Register(r Router) {
	// kube-apiserver answers every discovery path with a trailing slash
	// too (/apis/, /apis/<group>/, ...), as without.
	r.GET("/api", s.serveAPI)
	r.GET("/api/", s.serveAPI)
	r.GET("/api/:version", s.serveCoreResources)
	r.GET("/api/:version/", s.serveCoreResources)
	r.GET("/apis", s.serveAPIs)
	r.GET("/apis/", s.serveAPIs)
	r.GET("/apis/:group", s.serveGroup)
	r.GET("/apis/:group/", s.serveGroup)
	r.GET("/apis/:group/:version", s.serveGroupResources)
	r.GET("/apis/:group/:version/", s.serveGroupResources)
}

func (s *Set) serveAPI(c echo.Context) error {
	d := s.docs.Load()
	format, err := negotiate(c.Request().Header.Get(echo.HeaderAccept), true)
	if err != nil {
		return apistatus.Write(c, err)
	}
	if format != legacy {
		return serveAggregated(c, d.core, format)
	}
	versions := metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: d.coreVersions,
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
			{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request().Host},
		},
	}
	if versions.Versions == nil {
		versions.Versions = []string{}
	}
	b, err := json.Marshal(versions)
	if err != nil {
		return apistatus.Write(c, fmt.Errorf("encode api versions: %w", err))
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

func (s *Set) serveAPIs(c echo.Context) error {
	d := s.docs.Load()
	format, err := negotiate(c.Request().Header.Get(echo.HeaderAccept), true)
	if err != nil {
		return apistatus.Write(c, err)
	}
	if format != legacy {
		return serveAggregated(c, d.apis, format)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, d.groupList)
}

func (s *Set) serveGroup(c echo.Context) error {
	return serveLegacy(c, s.docs.Load().groups[c.Param("group")])
}

func (s *Set) serveCoreResources(c echo.Context) error {
	return serveLegacy(c, s.docs.Load().resourceLists[c.Param("version")])
}

func (s *Set) serveGroupResources(c echo.Context) error {
	return serveLegacy(c, s.docs.Load().resourceLists[c.Param("group")+"/"+c.Param("version")])
}

// serveLegacy serves a document that only exists in its legacy form.
func serveLegacy(c echo.Context, doc []byte) error {
	if doc == nil {
		return apistatus.Write(c, echo.ErrNotFound)
	}
	if _, err := negotiate(c.Request().Header.Get(echo.HeaderAccept), false); err != nil {
		return apistatus.Write(c, err)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, doc)
}

// serveAggregated answers with the aggregated document, or 304 when the
// client holds it already, with kube-apiserver's caching headers.
func serveAggregated(c echo.Context, doc aggregatedDocument, format format) error {
	h := c.Response().Header()
	quoted := strconv.Quote(doc.etag)
	h.Set("ETag", quoted)
	h.Set("Vary", "Accept")
	h.Set("Cache-Control", "public")
	if c.Request().Header.Get("If-None-Match") == quoted {
		return c.NoContent(http.StatusNotModified)
	}
	if format == aggregatedV2Beta1 {
		return c.Blob(http.StatusOK, MediaTypeV2Beta1, doc.v2beta1)
	}
	return c.Blob(http.StatusOK, MediaTypeV2, doc.v2)
}

// format is the form of a discovery document a client accepts.
type format int

const (
	legacy format = iota
	aggregatedV2
	aggregatedV2Beta1
)

// negotiate picks the first form the Accept header allows, in the client's
// order of preference. Only JSON is served; a clause asking for another
// representation (as=Table, protobuf) is skipped as kube-apiserver skips
// what a discovery endpoint cannot produce.
func negotiate(accept string, aggregatedAllowed bool) (format, error) {
	if accept == "" {
		return legacy, nil
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		if !jsonMatches(clause) {
			continue
		}
		as, hasAs := clause.Params["as"]
		if !hasAs {
			return legacy, nil
		}
		if !aggregatedAllowed || as != "APIGroupDiscoveryList" || clause.Params["g"] != "apidiscovery.k8s.io" {
			continue
		}
		switch clause.Params["v"] {
		case "v2":
			return aggregatedV2, nil
		case "v2beta1":
			return aggregatedV2Beta1, nil
		}
	}
	return legacy, notAcceptable()
}

func jsonMatches(c goautoneg.Accept) bool {
	switch {
	case c.Type == "*" && c.SubType == "*":
		return true
	case c.Type == "application" && (c.SubType == "*" || c.SubType == "json"):
		return true
	}
	return false
}

// notAcceptable is the 406 kube-apiserver answers when no accepted media
// type can be served.
func notAcceptable() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusNotAcceptable,
		Reason:  metav1.StatusReasonNotAcceptable,
		Message: "only the following media types are accepted: " + echo.MIMEApplicationJSON,
	}}
}
