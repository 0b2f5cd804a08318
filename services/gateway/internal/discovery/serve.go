package discovery

import (
	"encoding/json"
	"fmt"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
)

// Router is where the handlers are mounted: *echo.Echo and *echo.Group
// both are one.
type Router interface {
	GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// Register mounts the discovery endpoints on r. Resource requests
// (/apis/<group>/<version>/<resource>) have more segments and match none
// of them.
func (m *Merger) Register(r Router) {
	// kube-apiserver answers every discovery path with a trailing slash
	// too (/apis/, /apis/<group>/, ...), as without.
	r.GET("/api", m.serveAPI)
	r.GET("/api/", m.serveAPI)
	r.GET("/api/:version", m.serveCoreResources)
	r.GET("/api/:version/", m.serveCoreResources)
	r.GET("/apis", m.serveAPIs)
	r.GET("/apis/", m.serveAPIs)
	r.GET("/apis/:group", m.serveGroup)
	r.GET("/apis/:group/", m.serveGroup)
	r.GET("/apis/:group/:version", m.serveGroupResources)
	r.GET("/apis/:group/:version/", m.serveGroupResources)
}

func (m *Merger) serveAPI(c echo.Context) error {
	d := m.docs.Load()
	return d.core.Serve(c, func() ([]byte, error) {
		versions := metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: d.coreVersions,
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request().Host},
			},
		}
		b, err := json.Marshal(versions)
		if err != nil {
			return nil, fmt.Errorf("encode api versions: %w", err)
		}
		return b, nil
	})
}

func (m *Merger) serveAPIs(c echo.Context) error {
	d := m.docs.Load()
	return d.apis.Serve(c, func() ([]byte, error) { return d.groupList, nil })
}

func (m *Merger) serveGroup(c echo.Context) error {
	return libdiscovery.ServeLegacy(c, m.docs.Load().groups[c.Param("group")])
}

func (m *Merger) serveCoreResources(c echo.Context) error {
	return libdiscovery.ServeLegacy(c, m.docs.Load().resourceLists["/api/"+c.Param("version")])
}

func (m *Merger) serveGroupResources(c echo.Context) error {
	return libdiscovery.ServeLegacy(c, m.docs.Load().resourceLists["/apis/"+c.Param("group")+"/"+c.Param("version")])
}
