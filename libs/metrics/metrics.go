package metrics

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
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
	serve := promhttp.HandlerFor(g, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := frontproxy.VerifyClient(r, clientCA); err != nil {
			log.Debug("metrics refused", "remote", r.RemoteAddr, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewUnauthorized("Unauthorized")); werr != nil {
				log.Debug("write refusal", "err", werr)
			}
			return
		}
		serve.ServeHTTP(w, r)
	})
}
