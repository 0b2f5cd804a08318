package openapi

import (
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"kplane.dev/libs/apiserver/apistatus"
)

// Router is where the handlers are mounted: *echo.Echo, or an *echo.Group
// without a prefix.
type Router interface {
	GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) *echo.Route
}

// Register mounts /openapi/v2, /openapi/v3 and /openapi/v3/<group-version>
// on r.
func (m *Merger) Register(r Router) {
	m.v2.RegisterOpenAPIVersionedService(PathV2, pathHandler{r})
	r.GET(PathV3, m.serveIndex)
	r.GET(PathV3+"/*", m.serveGroupVersion)
}

func (m *Merger) serveIndex(c echo.Context) error {
	idx := m.index.Load()
	h := c.Response().Header()
	quoted := strconv.Quote(idx.etag)
	h.Set("ETag", quoted)
	if c.Request().Header.Get("If-None-Match") == quoted {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, idx.encoded)
}

// Headers passed between a client and the owner of a group-version's
// document: the caching that kube-openapi's hash query drives.
var (
	requestHeaders  = []string{"Accept", "If-None-Match", "If-Modified-Since"}
	responseHeaders = []string{"Content-Type", "ETag", "Cache-Control", "Expires", "Last-Modified", "Vary", "Age"}
)

// serveGroupVersion proxies the document of a listed group-version to its
// owner, with the query (the hash) as the client sent it.
func (m *Merger) serveGroupVersion(c echo.Context) error {
	key := strings.TrimPrefix(c.Request().URL.Path, PathV3+"/")
	owner, ok := m.index.Load().owners[key]
	if !ok {
		return apistatus.Write(c, echo.ErrNotFound)
	}
	u := owner.Backend.JoinPath(PathV3, key)
	u.RawQuery = c.Request().URL.RawQuery
	req, err := http.NewRequestWithContext(c.Request().Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return apistatus.Write(c, err)
	}
	for _, k := range requestHeaders {
		if v := c.Request().Header.Values(k); len(v) > 0 {
			req.Header[k] = v
		}
	}
	setIdentity(req.Header)
	client := m.client
	if owner.Client != nil {
		client = owner.Client
	}
	resp, err := client.Do(req)
	if err != nil {
		return apistatus.Write(c, echo.NewHTTPError(http.StatusServiceUnavailable, "error trying to reach service: "+err.Error()))
	}
	defer resp.Body.Close()
	for _, k := range responseHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			c.Response().Header()[k] = v
		}
	}
	c.Response().WriteHeader(resp.StatusCode)
	_, err = io.Copy(c.Response(), resp.Body)
	return err
}

// pathHandler mounts kube-openapi's handlers on echo.
type pathHandler struct{ r Router }

func (p pathHandler) Handle(path string, h http.Handler) {
	p.r.GET(path, echo.WrapHandler(h))
}
