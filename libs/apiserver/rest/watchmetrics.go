package rest

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// WatchMetrics are kube-apiserver's metrics of the watches it serves:
// the watchers open and the events sent to them, by the group, version
// and kind served.
type WatchMetrics struct {
	watchers   *prometheus.GaugeVec
	events     *prometheus.CounterVec
	eventSizes *prometheus.HistogramVec
}

// NewWatchMetrics registers the watch metrics on reg.
func NewWatchMetrics(reg prometheus.Registerer) (*WatchMetrics, error) {
	gvk := []string{"group", "version", "kind"}
	m := &WatchMetrics{
		watchers: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_registered_watchers",
			Help: "Number of currently registered watchers for a given resources",
		}, gvk),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_events_total",
			Help: "Number of events sent in watch clients",
		}, gvk),
		eventSizes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "apiserver_watch_events_sizes",
			Help: "Watch event size distribution in bytes",
			// kube's: 1K, 2K, 4K, ..., 128K.
			Buckets: prometheus.ExponentialBuckets(1024, 2, 8),
		}, gvk),
	}
	for _, c := range []prometheus.Collector{m.watchers, m.events, m.eventSizes} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register watch metrics: %w", err)
		}
	}
	return m, nil
}

// WithWatchMetrics records the handler's watches in m.
func WithWatchMetrics(m *WatchMetrics) Option { return func(h *Handler) { h.watchMetrics = m } }

// watchStarted counts a watcher of gvk until the returned func is
// called. A nil *WatchMetrics records nothing.
func (m *WatchMetrics) watchStarted(gvk schema.GroupVersionKind) (done func()) {
	if m == nil {
		return func() {}
	}
	g := m.watchers.WithLabelValues(gvk.Group, gvk.Version, gvk.Kind)
	g.Inc()
	return g.Dec
}

// eventSent records an event of size bytes sent to a watcher of gvk.
func (m *WatchMetrics) eventSent(gvk schema.GroupVersionKind, size int) {
	if m == nil {
		return
	}
	m.events.WithLabelValues(gvk.Group, gvk.Version, gvk.Kind).Inc()
	m.eventSizes.WithLabelValues(gvk.Group, gvk.Version, gvk.Kind).Observe(float64(size))
}
