package discovery_test

import (
	"net/http"
	"testing"

	kdiscovery "kplane.dev/libs/apiserver/discovery"
	"kplane.dev/libs/apiserver/resource"
)

// BenchmarkReplace measures what a change of the served set costs.
func BenchmarkReplace(b *testing.B) {
	resources := []*resource.Resource{namespaces(), configMaps(), widgets("v1beta1"), widgets("v1")}
	set, err := kdiscovery.NewSet(resources)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := set.Replace(resources); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkServeAggregated measures one aggregated /apis request.
func BenchmarkServeAggregated(b *testing.B) {
	srv := newServer(b, namespaces(), configMaps(), widgets("v1beta1"), widgets("v1"))
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/apis", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Accept", kdiscovery.MediaTypeV2)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
