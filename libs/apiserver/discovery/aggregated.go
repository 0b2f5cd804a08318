package discovery

import (
	"net/http"

	"github.com/labstack/echo/v4"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"

	"kplane.dev/libs/apiserver/apistatus"
)

// Aggregated is an encoded aggregated discovery document, for servers that
// assemble one from groups of their own (the gateway merges its backends').
type Aggregated struct {
	doc aggregatedDocument
}

// NewAggregated encodes groups, in the order given, as an
// APIGroupDiscoveryList in every version clients ask for, with the ETag
// kube-apiserver would give it.
func NewAggregated(groups []apidiscoveryv2.APIGroupDiscovery) (Aggregated, error) {
	doc, err := aggregate(groups, nil)
	if err != nil {
		return Aggregated{}, err
	}
	return Aggregated{doc: doc}, nil
}

// ETag is the document's entity tag, unquoted.
func (a Aggregated) ETag() string { return a.doc.etag }

// Serve answers a request to /api or /apis: with a when its Accept header
// asks for aggregated discovery (304 when If-None-Match holds its ETag),
// with the legacy document otherwise, and 406 when neither is acceptable.
func (a Aggregated) Serve(c echo.Context, legacyDoc func() ([]byte, error)) error {
	f, err := negotiate(c.Request().Header.Get(echo.HeaderAccept), true)
	if err != nil {
		return apistatus.Write(c, err)
	}
	if f != legacy {
		return serveAggregated(c, a.doc, f)
	}
	b, err := legacyDoc()
	if err != nil {
		return apistatus.Write(c, err)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b)
}

// ServeLegacy answers with a document that has only a legacy form
// (/apis/<group>, /apis/<group>/<version>): 404 when doc is nil, 406 when
// the Accept header allows no JSON.
func ServeLegacy(c echo.Context, doc []byte) error {
	return serveLegacy(c, doc)
}
