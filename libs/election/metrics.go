package election

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics record which elections a replica leads and how often it won
// one, labelled by the name each Run gives its election.
type Metrics struct {
	leader *prometheus.GaugeVec
	terms  *prometheus.CounterVec
}

// NewMetrics registers the election metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "kplane", Subsystem: "election", Name: "leader",
			Help: "1 while this replica leads the election, 0 while it campaigns.",
		}, []string{"election"}),
		terms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "election", Name: "terms_total",
			Help: "Terms this replica won in the election; a rise on several replicas at once is leadership moving.",
		}, []string{"election"}),
	}
	for _, c := range []prometheus.Collector{m.leader, m.terms} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register election metrics: %w", err)
		}
	}
	return m, nil
}

// WithMetrics records the election, called name (one of a few fixed
// names: the label's values), in m.
func WithMetrics(m *Metrics, name string) Option {
	return func(o *options) { o.metrics, o.name = m, name }
}

// campaigning sets the gauge before the first term, so that a replica
// that never leads reports 0 rather than nothing.
func (o *options) campaigning() {
	if o.metrics != nil {
		o.metrics.leader.WithLabelValues(o.name).Set(0)
	}
}

// leading records a term won; the returned func records its end.
func (o *options) leading() (ended func()) {
	if o.metrics == nil {
		return func() {}
	}
	o.metrics.terms.WithLabelValues(o.name).Inc()
	g := o.metrics.leader.WithLabelValues(o.name)
	g.Set(1)
	return func() { g.Set(0) }
}
