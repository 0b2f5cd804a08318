package storagemetrics

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Operations on etcd, the values of the operation label: kube's, the
// read of etcd's current revision that consistent reads from the watch
// cache start with, and the check that a paged list's revision is not
// compacted before the cache serves its next page.
const (
	OpCreate          = "create"
	OpGet             = "get"
	OpList            = "list"
	OpUpdate          = "update"
	OpDelete          = "delete"
	OpCurrentRevision = "currentRevision"
	OpRetains         = "retains"
)

// requestBuckets are kube's buckets of etcd_request_duration_seconds,
// those of apiserver_request_duration_seconds, so that the two compare.
var requestBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// readWaitBuckets are kube's buckets of apiserver_watch_cache_read_wait_seconds.
var readWaitBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3}

// Metrics are the storage metrics of one registry.
type Metrics struct {
	requests        *prometheus.CounterVec
	requestErrors   *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	etcdEvents      *prometheus.CounterVec
	objects         *prometheus.GaugeVec
	resourceObjects *prometheus.GaugeVec
	cacheReceived   *prometheus.CounterVec
	cacheDispatched *prometheus.CounterVec
	cacheInits      *prometheus.CounterVec
	cacheRevision   *prometheus.GaugeVec
	terminated      *prometheus.CounterVec
	readWait        *prometheus.HistogramVec

	// mu guards current: the latest share of each resource, the only one
	// whose Forget drops the resource's gauges.
	mu      sync.Mutex
	current map[schema.GroupResource]*Resource
}

// New registers the storage metrics on reg.
func New(reg prometheus.Registerer) (*Metrics, error) {
	gr := []string{"group", "resource"}
	op := []string{"operation", "group", "resource"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_requests_total",
			Help: "Etcd request counts for each operation and object type.",
		}, op),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "etcd_request_errors_total",
			Help: "Etcd failed request counts for each operation and object type.",
		}, op),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "etcd_request_duration_seconds",
			Help:    "Etcd request latency in seconds for each operation and object type.",
			Buckets: requestBuckets,
		}, op),
		etcdEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_storage_events_received_total",
			Help: "Number of etcd events received split by kind.",
		}, gr),
		objects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_storage_objects",
			Help: "Number of stored objects at the time of last check split by kind.",
		}, []string{"resource"}),
		resourceObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_resource_objects",
			Help: "Number of stored objects at the time of last check split by kind.",
		}, gr),
		cacheReceived: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_cache_events_received_total",
			Help: "Counter of events received in watch cache broken by resource type.",
		}, gr),
		cacheDispatched: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_cache_events_dispatched_total",
			Help: "Counter of events dispatched in watch cache broken by resource type.",
		}, gr),
		cacheInits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_watch_cache_initializations_total",
			Help: "Counter of watch cache initializations broken by resource type.",
		}, gr),
		cacheRevision: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_watch_cache_resource_version",
			Help: "Current resource version of watch cache broken by resource type.",
		}, gr),
		terminated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_terminated_watchers_total",
			Help: "Counter of watchers closed due to unresponsiveness broken by resource type.",
		}, gr),
		readWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_watch_cache_read_wait_seconds",
			Help:    "Histogram of time spent waiting for a watch cache to become fresh.",
			Buckets: readWaitBuckets,
		}, gr),
		current: map[schema.GroupResource]*Resource{},
	}
	for _, c := range []prometheus.Collector{
		m.requests, m.requestErrors, m.requestDuration, m.etcdEvents, m.objects, m.resourceObjects,
		m.cacheReceived, m.cacheDispatched, m.cacheInits, m.cacheRevision, m.terminated, m.readWait,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register storage metrics: %w", err)
		}
	}
	return m, nil
}

// Resource is the share of one resource in the metrics. A nil *Resource
// records nothing, so that a store built without metrics need not ask.
type Resource struct {
	m  *Metrics
	gr schema.GroupResource
}

// Resource returns the share of gr. Its error counters start at zero,
// so that an error rate reads 0 rather than nothing before the first
// error.
func (m *Metrics) Resource(gr schema.GroupResource) *Resource {
	for _, op := range []string{OpCreate, OpGet, OpList, OpUpdate, OpDelete, OpCurrentRevision, OpRetains} {
		m.requestErrors.WithLabelValues(op, gr.Group, gr.Resource)
	}
	m.terminated.WithLabelValues(gr.Group, gr.Resource)
	r := &Resource{m: m, gr: gr}
	m.mu.Lock()
	m.current[gr] = r
	m.mu.Unlock()
	return r
}

// Request records one etcd request of operation op that started at start
// and ended with err.
func (r *Resource) Request(op string, start time.Time, err error) {
	if r == nil {
		return
	}
	r.m.requestDuration.WithLabelValues(op, r.gr.Group, r.gr.Resource).Observe(time.Since(start).Seconds())
	r.m.requests.WithLabelValues(op, r.gr.Group, r.gr.Resource).Inc()
	if err != nil {
		r.m.requestErrors.WithLabelValues(op, r.gr.Group, r.gr.Resource).Inc()
	}
}

// EtcdEvents records n events received from an etcd watch.
func (r *Resource) EtcdEvents(n int) {
	if r == nil {
		return
	}
	r.m.etcdEvents.WithLabelValues(r.gr.Group, r.gr.Resource).Add(float64(n))
}

// Objects records how many objects the resource has.
func (r *Resource) Objects(n int) {
	if r == nil {
		return
	}
	r.m.objects.WithLabelValues(r.gr.String()).Set(float64(n))
	r.m.resourceObjects.WithLabelValues(r.gr.Group, r.gr.Resource).Set(float64(n))
}

// CacheInitialized records a watch cache filled from a list at revision
// rev.
func (r *Resource) CacheInitialized(rev int64) {
	if r == nil {
		return
	}
	r.m.cacheInits.WithLabelValues(r.gr.Group, r.gr.Resource).Inc()
	r.CacheRevision(rev)
}

// CacheRevision records the revision the watch cache has reached; like
// kube, only its 15 least significant digits, which a float64 holds
// exactly.
func (r *Resource) CacheRevision(rev int64) {
	if r == nil {
		return
	}
	r.m.cacheRevision.WithLabelValues(r.gr.Group, r.gr.Resource).Set(float64(rev % 1_000_000_000_000_000))
}

// CacheEventReceived records an event the watch cache received from etcd.
func (r *Resource) CacheEventReceived() {
	if r == nil {
		return
	}
	r.m.cacheReceived.WithLabelValues(r.gr.Group, r.gr.Resource).Inc()
}

// CacheEventDispatched records an event the watch cache handed to its
// watchers.
func (r *Resource) CacheEventDispatched() {
	if r == nil {
		return
	}
	r.m.cacheDispatched.WithLabelValues(r.gr.Group, r.gr.Resource).Inc()
}

// WatcherTerminated records a watcher ended for not keeping up.
func (r *Resource) WatcherTerminated() {
	if r == nil {
		return
	}
	r.m.terminated.WithLabelValues(r.gr.Group, r.gr.Resource).Inc()
}

// ReadWait records how long a read waited for the watch cache to be
// fresh enough.
func (r *Resource) ReadWait(d time.Duration) {
	if r == nil {
		return
	}
	r.m.readWait.WithLabelValues(r.gr.Group, r.gr.Resource).Observe(d.Seconds())
}

// Forget drops the gauges of the resource, which describe a watch cache
// that stopped: a resource no longer served (a deleted CRD's) must not
// go on reporting its last count. A share the resource was given again
// since (a CRD deleted and created anew, whose old cache may stop after
// the new one started) forgets nothing.
func (r *Resource) Forget() {
	if r == nil {
		return
	}
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	if r.m.current[r.gr] != r {
		return
	}
	delete(r.m.current, r.gr)
	r.m.objects.DeleteLabelValues(r.gr.String())
	r.m.resourceObjects.DeleteLabelValues(r.gr.Group, r.gr.Resource)
	r.m.cacheRevision.DeleteLabelValues(r.gr.Group, r.gr.Resource)
}
