package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Results of a review, the values of the result label.
const (
	resultAuthenticated   = "authenticated"
	resultUnauthenticated = "unauthenticated"
	resultError           = "error"
)

type metrics struct {
	reviews        *prometheus.CounterVec
	reviewDuration prometheus.Histogram
	tokenRequests  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
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
	}
	for _, c := range []prometheus.Collector{m.reviews, m.reviewDuration, m.tokenRequests} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register authn metrics: %w", err)
		}
	}
	for _, r := range []string{resultAuthenticated, resultUnauthenticated, resultError} {
		m.reviews.WithLabelValues(r)
	}
	return m, nil
}
