package webhook

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// metrics are kube-apiserver's webhook admission metrics, with its names,
// labels and buckets, so that its dashboards read kplane's.
type metrics struct {
	duration   *prometheus.HistogramVec
	requests   *prometheus.CounterVec
	rejections *prometheus.CounterVec
}

// newMetrics registers the metrics on reg; nil registers nothing.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_admission_webhook_admission_duration_seconds",
			Help:    "Admission webhook latency histogram in seconds, identified by name and broken out for each operation and API resource and type (validate or admit).",
			Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 10, 25},
		}, []string{"name", "type", "operation", "rejected"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_request_total",
			Help: "Admission webhook request total, identified by name and broken out for each admission type (validating or mutating) and operation. Additional labels specify whether the request was rejected or not and an HTTP status code.",
		}, []string{"name", "type", "operation", "code", "rejected"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_admission_webhook_rejection_count",
			Help: "Admission webhook rejection count, identified by name and broken out for each admission type (validating or admit) and operation. Additional labels specify an error type (calling_webhook_error or apiserver_internal_error if an error occurred; no_error otherwise) and optionally a non-zero rejection code if the webhook rejects the request with an HTTP status code (honored by the apiserver when the code is greater or equal to 400).",
		}, []string{"name", "type", "operation", "error_type", "rejection_code"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.requests, m.rejections} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register webhook metrics: %w", err)
		}
	}
	return m, nil
}

// observe records one call of webhook as kube does: type is admit or
// validate; ans and err are what the call returned.
func (m *metrics) observe(webhook, typ, operation string, took time.Duration, ans *answer, err error) {
	rejected := err != nil || (ans != nil && !ans.allowed)
	// The webhook answered when there is an answer; kube counts 0 for
	// a call that got none.
	code := "0"
	if ans != nil {
		code = "200"
	}
	m.duration.WithLabelValues(webhook, typ, operation, strconv.FormatBool(rejected)).Observe(took.Seconds())
	m.requests.WithLabelValues(webhook, typ, operation, code, strconv.FormatBool(rejected)).Inc()
	switch {
	case err != nil:
		errorType, rejectionCode := "apiserver_internal_error", int32(0)
		var ce *callError
		if errors.As(err, &ce) {
			errorType = "calling_webhook_error"
		}
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			rejectionCode = st.Status().Code
		}
		m.rejections.WithLabelValues(webhook, typ, operation, errorType, strconv.Itoa(int(rejectionCode))).Inc()
	case rejected:
		rejectionCode := int32(0)
		if ans.result != nil {
			rejectionCode = ans.result.Code
		}
		m.rejections.WithLabelValues(webhook, typ, operation, "no_error", strconv.Itoa(int(rejectionCode))).Inc()
	}
}
