package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/proxy"
)

// BenchmarkForward proxies a get and a create of a 1 KiB object, as the
// gateway does for every request; its bytes per op are mostly the
// gateway's garbage. The backend runs in the same process, so ns/op is
// the CPU of both ends of the hop.
func BenchmarkForward(b *testing.B) {
	body := `{"kind":"ConfigMap","data":{"d":"` + strings.Repeat("x", 1024) + `"}}`
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write([]byte(body))
	}))
	backend.EnableHTTP2 = true
	backend.StartTLS()
	defer backend.Close()
	tr := transportTo(b, backend)
	defer tr.CloseIdleConnections()
	log := slog.New(slog.DiscardHandler)
	u := &frontproxy.User{Name: "alice"}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		b.Run(method, func(b *testing.B) {
			b.ReportAllocs()
			// 16 requests at once on 2 cores, as kplane-load's workers.
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					w := httptest.NewRecorder()
					var r *http.Request
					if method == http.MethodPost {
						// A reader net/http does not know to be in
						// memory, as the gateway's server gives.
						r = httptest.NewRequest(method, "/api/v1/namespaces/default/configmaps", nil)
						r.Body, r.ContentLength = io.NopCloser(struct{ io.Reader }{strings.NewReader(body)}), int64(len(body))
					} else {
						r = httptest.NewRequest(method, "/api/v1/namespaces/default/configmaps/a", nil)
					}
					proxy.Forward(w, r, tr, u, log)
					if w.Code != http.StatusOK || w.Body.Len() != len(body) {
						b.Fatalf("answer %d of %d bytes", w.Code, w.Body.Len())
					}
				}
			})
		})
	}
}
