package openapi_test

import (
	"net/http"
	"testing"

	"kplane.dev/libs/apiserver/openapi"
	"kplane.dev/libs/apiserver/resource"
)

// BenchmarkReplace measures what a change of the served set costs (a CRD
// appearing): building every document's paths and definitions.
func BenchmarkReplace(b *testing.B) {
	resources := []*resource.Resource{configMaps(b), namespaces(b), roles(b), widgets(), gadgets()}
	set, err := openapi.NewSet(resources)
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

// BenchmarkServeGroupVersion measures serving a hashed core/v1 document
// once it is encoded.
func BenchmarkServeGroupVersion(b *testing.B) {
	srv, _ := newServer(b, configMaps(b), namespaces(b))
	idx := getIndex(b, srv)
	u := srv.URL + idx.Paths["api/v1"].ServerRelativeURL
	b.ReportAllocs()
	for b.Loop() {
		resp, err := http.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}
