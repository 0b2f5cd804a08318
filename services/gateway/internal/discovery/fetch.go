package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	libdiscovery "kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/apiserver/frontproxy"
)

// maxDocumentBytes bounds what is read of one backend document.
const maxDocumentBytes = 64 << 20

// aggregatedCache is one backend's last aggregated document of /api or
// /apis, kept to ask for it again with If-None-Match.
type aggregatedCache struct {
	etag     string
	versions map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery
}

// backendDocuments is what one backend served at the last fetch.
type backendDocuments struct {
	aggregated map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery
	// legacy are the resource lists by route path (/apis/<group>/<version>).
	legacy map[string][]byte
}

// fetcher reads documents from one backend as the aggregator does: as
// system:kube-aggregator in system:masters, so a backend's authorization
// never hides part of the API.
type fetcher struct {
	client *http.Client
}

// get reads path from backend. It returns a nil body on 304.
func (f fetcher) get(ctx context.Context, backend *url.URL, path, accept, etag string) (body []byte, respETag string, err error) {
	u := backend.JoinPath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "", fmt.Errorf("build request for %s: %w", u, err)
	}
	req.Header.Set("Accept", accept)
	req.Header.Set(frontproxy.UserHeader, "system:kube-aggregator")
	req.Header.Set(frontproxy.GroupHeader, "system:masters")
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", u, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return nil, etag, nil
	case http.StatusOK:
	default:
		return nil, "", fmt.Errorf("get %s: status %d", u, resp.StatusCode)
	}
	body, err = io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", u, err)
	}
	return body, resp.Header.Get("ETag"), nil
}

// aggregated reads the aggregated document at path (/api or /apis),
// reusing cached when the backend says it did not change.
func (f fetcher) aggregated(ctx context.Context, backend *url.URL, path string, cached *aggregatedCache) (*aggregatedCache, error) {
	etag := ""
	if cached != nil {
		etag = cached.etag
	}
	body, respETag, err := f.get(ctx, backend, path, libdiscovery.MediaTypeV2, etag)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return cached, nil
	}
	var list apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode aggregated discovery of %s%s: %w", backend, path, err)
	}
	if list.Kind != "APIGroupDiscoveryList" {
		return nil, fmt.Errorf("decode aggregated discovery of %s%s: got kind %q", backend, path, list.Kind)
	}
	c := &aggregatedCache{etag: respETag, versions: map[metav1.GroupVersion]apidiscoveryv2.APIVersionDiscovery{}}
	for _, g := range list.Items {
		for _, v := range g.Versions {
			c.versions[metav1.GroupVersion{Group: g.Name, Version: v.Version}] = v
		}
	}
	return c, nil
}

// legacy reads the resource list of route, checking that it is one.
func (f fetcher) legacy(ctx context.Context, r Route) ([]byte, error) {
	body, _, err := f.get(ctx, r.Backend, r.legacyPath(), "application/json", "")
	if err != nil {
		return nil, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("decode resource list of %s%s: %w", r.Backend, r.legacyPath(), err)
	}
	if list.GroupVersion != r.GroupVersion.String() {
		return nil, fmt.Errorf("decode resource list of %s%s: got group version %q", r.Backend, r.legacyPath(), list.GroupVersion)
	}
	return body, nil
}
