package authorizer

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookName is the name label of the webhook mode, which kplane has
// one of.
const webhookName = "webhook"

// Results of a webhook call, kube's values of the result label.
const (
	resultSuccess  = "success"
	resultTimeout  = "timeout"
	resultCanceled = "canceled"
	resultError    = "error"
)

// WebhookMetrics are kube-apiserver's
// apiserver_authorization_webhook_evaluations_total, the calls of the
// webhook by result, and the lookups of the webhook's decision cache.
type WebhookMetrics struct {
	evaluations *prometheus.CounterVec
	cache       *prometheus.CounterVec
}

// NewWebhookMetrics registers the webhook metrics on reg.
func NewWebhookMetrics(reg prometheus.Registerer) (*WebhookMetrics, error) {
	m := &WebhookMetrics{
		evaluations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_authorization_webhook_evaluations_total",
			Help: "Round-trips to authorization webhooks.",
		}, []string{"name", "result"}),
		cache: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authz", Name: "webhook_cache_requests_total",
			Help: "Lookups of the webhook mode's decision cache, by whether the decision was cached (hit) or the webhook was called (miss).",
		}, []string{"status"}),
	}
	for _, c := range []prometheus.Collector{m.evaluations, m.cache} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	for _, r := range []string{resultSuccess, resultTimeout, resultCanceled, resultError} {
		m.evaluations.WithLabelValues(webhookName, r)
	}
	m.cache.WithLabelValues("hit")
	m.cache.WithLabelValues("miss")
	return m, nil
}

// WithWebhookMetrics records the webhook's calls and cache lookups in m.
func WithWebhookMetrics(m *WebhookMetrics) WebhookOption {
	return func(w *Webhook) { w.metrics = m }
}

// lookup records a cache lookup; a nil *WebhookMetrics records nothing.
func (m *WebhookMetrics) lookup(hit bool) {
	if m == nil {
		return
	}
	status := "miss"
	if hit {
		status = "hit"
	}
	m.cache.WithLabelValues(status).Inc()
}

// called records how a call of the webhook ended.
func (m *WebhookMetrics) called(err error) {
	if m == nil {
		return
	}
	result := resultSuccess
	var netErr net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		result = resultTimeout
	case errors.Is(err, context.Canceled):
		result = resultCanceled
	case err != nil:
		result = resultError
	}
	m.evaluations.WithLabelValues(webhookName, result).Inc()
}
