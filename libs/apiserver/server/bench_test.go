package server_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// BenchmarkGet reads one configmap through the HTTP server.
func BenchmarkGet(b *testing.B) {
	for _, kind := range storeKinds {
		for _, rv := range []string{"", "0"} {
			b.Run(fmt.Sprintf("%s/rv=%q", kind, rv), func(b *testing.B) {
				f := newFixture(b, kind)
				f.seedConfigMap("ns1", "a", nil, map[string]string{"k": "v"})
				benchGet(b, f.url+"/api/v1/namespaces/ns1/configmaps/a?resourceVersion="+rv)
			})
		}
	}
}

// BenchmarkList lists 1,000 configmaps through the HTTP server.
func BenchmarkList(b *testing.B) {
	for _, kind := range storeKinds {
		for _, rv := range []string{"", "0"} {
			b.Run(fmt.Sprintf("%s/rv=%q", kind, rv), func(b *testing.B) {
				f := newFixture(b, kind)
				for i := range 1000 {
					f.seedConfigMap("ns1", fmt.Sprintf("cm-%04d", i), map[string]string{"i": fmt.Sprint(i % 10)}, map[string]string{"k": "v"})
				}
				benchGet(b, f.url+"/api/v1/namespaces/ns1/configmaps?resourceVersion="+rv)
			})
		}
	}
}

func benchGet(b *testing.B, url string) {
	client := &http.Client{}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resp, err := client.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
		}
		b.SetBytes(n)
	}
}
