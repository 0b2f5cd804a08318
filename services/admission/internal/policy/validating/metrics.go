package validating

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are kube's validating admission policy metrics, with its names,
// labels and buckets.
type metrics struct {
	check    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	labels := []string{"policy", "policy_binding", "error_type", "enforcement_action"}
	m := &metrics{
		check: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "apiserver",
			Subsystem: "validating_admission_policy",
			Name:      "check_total",
			Help:      "Validation admission policy check total, labeled by policy and further identified by binding and enforcement action taken.",
		}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "apiserver",
			Subsystem: "validating_admission_policy",
			Name:      "check_duration_seconds",
			Help:      "Validation admission latency for individual validation expressions in seconds, labeled by policy and further including binding and enforcement action taken.",
			Buckets:   []float64{0.0000005, 0.001, 0.01, 0.1, 1.0},
		}, labels),
	}
	if reg == nil {
		return m, nil
	}
	check, err := register(reg, m.check)
	if err != nil {
		return nil, err
	}
	duration, err := register(reg, m.duration)
	if err != nil {
		return nil, err
	}
	return &metrics{check: check, duration: duration}, nil
}

// observe counts one validation that did not simply pass: action is
// kube's enforcement_action (allow for an error ignored, deny, warn or
// audit).
func (m *metrics) observe(policy, binding, errorType, action string, elapsed time.Duration) {
	m.check.WithLabelValues(policy, binding, errorType, action).Inc()
	m.duration.WithLabelValues(policy, binding, errorType, action).Observe(elapsed.Seconds())
}

// register registers c on reg, or returns the collector already
// registered there under its name, as when two Validators share a
// registry.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, fmt.Errorf("register validating admission policy metrics: %w", err)
}
