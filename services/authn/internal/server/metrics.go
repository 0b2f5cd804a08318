package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	authncache "kplane.dev/services/authn/internal/authenticator/cache"
)

// Results of a review, the values of the result label.
const (
	resultAuthenticated   = "authenticated"
	resultUnauthenticated = "unauthenticated"
	resultError           = "error"
)

// kube's results of authentication_attempts and
// authentication_duration_seconds.
const (
	kubeSuccess = "success"
	kubeFailure = "failure"
	kubeError   = "error"
)

type authnMetrics struct {
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	tokenRequests  *prometheus.CounterVec
	// attempts and attemptDuration are kube's names for reviews and
	// their duration, by kube's result.
	attempts        *prometheus.CounterVec
	attemptDuration *prometheus.HistogramVec
	tokenCache      *authncache.Metrics
}

func newMetrics(reg prometheus.Registerer) (*authnMetrics, error) {
	m := &authnMetrics{
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authn", Name: "reviews_total",
			Help: "TokenReviews answered, by result: authenticated, unauthenticated or error (the review itself failed).",
		}, []string{"result"}),
		reviewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "kplane", Subsystem: "authn", Name: "review_duration_seconds",
			Help:    "Time to answer a TokenReview.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		tokenRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "authn", Name: "token_requests_total",
			Help: "TokenRequests answered, by result: issued, invalid or error.",
		}, []string{"result"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "authentication_attempts",
			Help: "Counter of authenticated attempts.",
		}, []string{"result"}),
		attemptDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "authentication_duration_seconds",
			Help:    "Authentication duration in seconds broken out by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"result"}),
	}
	for _, c := range []prometheus.Collector{m.reviews, m.reviewDuration, m.tokenRequests, m.attempts, m.attemptDuration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register authn metrics: %w", err)
		}
	}
	for _, r := range []string{resultAuthenticated, resultUnauthenticated, resultError} {
		m.reviews.WithLabelValues(r)
	}
	for _, r := range []string{kubeSuccess, kubeFailure, kubeError} {
		m.attempts.WithLabelValues(r)
	}
	var err error
	if m.tokenCache, err = authncache.NewMetrics(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// reviewed records a review that took seconds and ended with result,
// kubeResult in kube's words.
func (m *authnMetrics) reviewed(result, kubeResult string, seconds float64) {
	m.reviews.WithLabelValues(result).Inc()
	m.attempts.WithLabelValues(kubeResult).Inc()
	m.attemptDuration.WithLabelValues(kubeResult).Observe(seconds)
}
