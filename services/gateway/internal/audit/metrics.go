package audit

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are kube-apiserver's audit metrics, with its names and labels.
type metrics struct {
	events prometheus.Counter
	errors *prometheus.CounterVec
	levels *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "apiserver_audit_event_total",
			Help: "Counter of audit events generated and sent to the audit backend.",
		}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_audit_error_total",
			Help: "Counter of audit events that failed to be audited properly. Plugin identifies the plugin affected by the error.",
		}, []string{"plugin"}),
		levels: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_audit_level_total",
			Help: "Counter of policy levels for audit events (1 per request).",
		}, []string{"level"}),
	}
	for _, c := range []prometheus.Collector{m.events, m.errors, m.levels} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register audit metrics: %w", err)
		}
	}
	return m, nil
}
