package e2e

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/pki"
	"kplane.dev/test/e2e/harness"
)

// TestProfiling: every service serves the runtime's profiles under
// /debug/pprof/ by default, as kube-apiserver does with --profiling. The
// gateway authorizes them as non-resource URLs, which only
// system:masters (cluster-admin) has; the internal services answer a
// client certificate of the cluster CA and no one else; a service
// started with --profiling=false serves none.
func TestProfiling(t *testing.T) {
	sys := harness.Start(t, harness.WithArgs("core", "--profiling=false"))
	if sys.Ports["core"] == 0 {
		t.Skip("reads each service on its own port, which a system the test did not start does not publish")
	}
	d := pki.Dir{Path: filepath.Join(sys.DataDir, "pki")}
	ca, err := d.CA("ca", "kplane-ca")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := d.Client(ca, "e2e-profiler", "e2e-profiler", []string{"system:masters"})
	if err != nil {
		t.Fatal(err)
	}
	monitoring, err := d.Client(ca, "e2e-monitoring", "e2e-monitoring", []string{"system:monitoring"})
	if err != nil {
		t.Fatal(err)
	}
	get := func(t *testing.T, service, path string, cert *pki.Cert) (int, string) {
		t.Helper()
		code, body := scrape(t, "https://127.0.0.1:"+strconv.Itoa(sys.Ports[service])+path, ca.Pool(), cert)
		return code, string(body)
	}
	tests := []struct {
		name, service, path string
		cert                *pki.Cert
		code                int
		want                string
	}{
		{name: "gateway, cluster admin", service: "gateway", path: "/debug/pprof/goroutine?debug=1", cert: admin, code: http.StatusOK, want: "goroutine profile: total"},
		{name: "gateway, index", service: "gateway", path: "/debug/pprof/", cert: admin, code: http.StatusOK, want: "heap"},
		{name: "gateway, monitoring may read metrics, not profiles", service: "gateway", path: "/debug/pprof/", cert: monitoring, code: http.StatusForbidden,
			want: `forbidden: User \"e2e-monitoring\" cannot get path \"/debug/pprof/\"`},
		{name: "authz, a certificate of the CA", service: "authz", path: "/debug/pprof/heap?debug=1", cert: monitoring, code: http.StatusOK, want: "heap profile"},
		{name: "authz, no certificate", service: "authz", path: "/debug/pprof/", code: http.StatusUnauthorized, want: "Unauthorized"},
		{name: "crd, a certificate of the CA", service: "crd", path: "/debug/pprof/goroutine?debug=1", cert: monitoring, code: http.StatusOK, want: "goroutine profile"},
		{name: "crd, no certificate", service: "crd", path: "/debug/pprof/goroutine?debug=1", code: http.StatusUnauthorized},
		// Core's other paths answer only the gateway: a certificate
		// of the CA names no one there.
		{name: "core, profiling off, not the gateway", service: "core", path: "/debug/pprof/", cert: admin, code: http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, tt.service, tt.path, tt.cert)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Errorf("GET %s on %s: %d, want %d with %q:\n%.400s", tt.path, tt.service, code, tt.code, tt.want, body)
			}
		})
	}
	t.Run("core, profiling off, as the gateway", func(t *testing.T) {
		var code int
		err := clientset(t, sys.CoreConfig(t)).Discovery().RESTClient().Get().AbsPath("/debug/pprof/").Do(context.Background()).StatusCode(&code).Error()
		if code != http.StatusNotFound || !apierrors.IsNotFound(err) {
			t.Errorf("GET /debug/pprof/ on core with --profiling=false: %d %v, want 404", code, err)
		}
	})
}
