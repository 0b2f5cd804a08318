package metrics

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kplane.dev/libs/apiserver/frontproxy"
)

// Path is where every service serves its metrics.
const Path = "/metrics"

// NewRegistry returns a registry with the Go runtime's and the process's
// collectors, which every service reports.
func NewRegistry() (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register runtime metrics: %w", err)
		}
	}
	return reg, nil
}

// Handler serves g in Prometheus' text format to a client whose
// certificate clientCA verifies, and 401 Unauthorized to any other, as
// kube-apiserver answers a client it cannot authenticate. A nil
// clientCA refuses everyone.
func Handler(g prometheus.Gatherer, clientCA *x509.CertPool, log *slog.Logger) http.Handler {
	return frontproxy.RequireClientCertificate(promhttp.HandlerFor(g, promhttp.HandlerOpts{}), clientCA, log)
}
