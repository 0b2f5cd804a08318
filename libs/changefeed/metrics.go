package changefeed

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics record how far the publisher is behind etcd: the newest
// revision it read from etcd's watch and the newest JetStream
// acknowledged, whose difference is the feed's lag in revisions.
type Metrics struct {
	watched   prometheus.Gauge
	published prometheus.Gauge
	resyncs   prometheus.Counter
}

// NewMetrics registers the publisher's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		watched: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "kplane", Subsystem: "changefeed", Name: "watched_revision",
			Help: "Newest etcd revision the change feed publisher has read a change of.",
		}),
		published: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "kplane", Subsystem: "changefeed", Name: "published_revision",
			Help: "Newest etcd revision whose changes JetStream has acknowledged; watched_revision minus it is the feed's lag.",
		}),
		resyncs: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "changefeed", Name: "resyncs_total",
			Help: "Resync markers published: the feed lost its place (compaction, an empty stream) and consumers must list again.",
		}),
	}
	for _, c := range []prometheus.Collector{m.watched, m.published, m.resyncs} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register change feed metrics: %w", err)
		}
	}
	return m, nil
}

// WithMetrics records the publisher's progress in m.
func WithMetrics(m *Metrics) Option { return func(o *options) { o.metrics = m } }

// read records that the publisher has read the changes up to rev. A nil
// *Metrics records nothing.
func (m *Metrics) read(rev int64) {
	if m != nil {
		m.watched.Set(float64(rev))
	}
}

// acknowledged records that JetStream holds the changes up to rev.
func (m *Metrics) acknowledged(rev int64) {
	if m != nil {
		m.published.Set(float64(rev))
	}
}

func (m *Metrics) resynced() {
	if m != nil {
		m.resyncs.Inc()
	}
}
