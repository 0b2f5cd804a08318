package filters

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"kplane.dev/libs/apiserver/requestinfo"
)

// component is kube's component label of API requests.
const component = "apiserver"

// durationBuckets are kube-apiserver's buckets of
// apiserver_request_duration_seconds; SLO dashboards depend on them.
var durationBuckets = []float64{0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60}

// reportedVerbs are the verbs kube reports; any other is "other", so that
// label values stay a small fixed set.
var reportedVerbs = map[string]bool{
	"APPLY": true, "CONNECT": true, "CREATE": true, "DELETE": true, "DELETECOLLECTION": true, "GET": true, "LIST": true,
	"PATCH": true, "POST": true, "PROXY": true, "PUT": true, "UPDATE": true, "WATCH": true, "WATCHLIST": true,
}

// connectSubresources are reported as CONNECT.
var connectSubresources = map[string]bool{"log": true, "exec": true, "portforward": true, "attach": true, "proxy": true}

type metrics struct {
	requests    *prometheus.CounterVec
	durations   *prometheus.HistogramVec
	longRunning *prometheus.GaugeVec
}

// newMetrics registers kube-apiserver's request metrics on reg; the
// in-flight gauges read the limit channels.
func newMetrics(reg prometheus.Registerer, readOnly, mutating chan struct{}) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "apiserver_request_total",
			Help: "Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.",
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "apiserver_request_duration_seconds",
			Help:    "Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.",
			Buckets: durationBuckets,
		}, []string{"verb", "dry_run", "group", "version", "resource", "subresource", "scope", "component"}),
		longRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "apiserver_longrunning_requests",
			Help: "Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.",
		}, []string{"verb", "group", "version", "resource", "subresource", "scope", "component"}),
	}
	collectors := []prometheus.Collector{m.requests, m.durations, m.longRunning}
	// kube reports the largest use in the last second; the gateway reports
	// the use at the time of the scrape, which needs no sampling goroutine.
	for kind, c := range map[string]chan struct{}{"readOnly": readOnly, "mutating": mutating} {
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "apiserver_current_inflight_requests",
			Help:        "Number of requests in flight of this apiserver per request kind.",
			ConstLabels: prometheus.Labels{"request_kind": kind},
		}, func() float64 { return float64(len(c)) }))
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register request metrics: %w", err)
		}
	}
	return m, nil
}

// MetricsHandler serves the metrics of g in Prometheus' text format.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Metrics counts and times every API request and the health endpoints,
// with kube-apiserver's labels. Other non-resource requests are not
// recorded, as kube does not record them, which keeps the label values a
// fixed set. It hands errors to echo's error handler itself, to see the
// status code they become.
func (f *Filters) Metrics() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			info := f.info(c)
			labels, ok := requestLabels(r, info)
			if !ok {
				return next(c)
			}
			start := time.Now()
			if LongRunning(info) {
				g := f.metrics.longRunning.WithLabelValues(labels.verb, labels.group, labels.version, labels.resource, labels.subresource, labels.scope, labels.component)
				g.Inc()
				defer g.Dec()
			}
			if err := next(c); err != nil {
				c.Error(err)
			}
			f.metrics.requests.WithLabelValues(labels.verb, labels.dryRun, labels.group, labels.version, labels.resource, labels.subresource, labels.scope, labels.component,
				strconv.Itoa(c.Response().Status)).Inc()
			f.metrics.durations.WithLabelValues(labels.verb, labels.dryRun, labels.group, labels.version, labels.resource, labels.subresource, labels.scope, labels.component).
				Observe(time.Since(start).Seconds())
			return nil
		}
	}
}

type labels struct {
	verb, dryRun, group, version, resource, subresource, scope, component string
}

// requestLabels are the labels kube-apiserver gives r, and false for a
// request kube does not record.
func requestLabels(r *http.Request, info *requestinfo.Info) (labels, bool) {
	if !info.IsResourceRequest {
		// kube instruments the health endpoints themselves, not their
		// single checks, under the path and no component.
		if !slices.Contains(healthEndpoints, strings.TrimPrefix(r.URL.Path, "/")) {
			return labels{}, false
		}
		return labels{verb: reportedVerb(r, info, ""), dryRun: dryRun(r.URL), subresource: r.URL.Path}, true
	}
	scope := metricsScope(info)
	return labels{
		verb:        reportedVerb(r, info, scope),
		dryRun:      dryRun(r.URL),
		group:       info.APIGroup,
		version:     info.APIVersion,
		resource:    info.Resource,
		subresource: info.Subresource,
		scope:       scope,
		component:   component,
	}, true
}

// metricsScope is the scope of the route kube would have served the
// request from: an object named in the path or being created is
// "resource", a collection is "namespace" or "cluster".
func metricsScope(info *requestinfo.Info) string {
	if len(info.Parts) >= 2 || info.Verb == "create" {
		return "resource"
	}
	if info.Namespace != "" {
		return "namespace"
	}
	return "cluster"
}

// reportedVerb is kube's verb label: the HTTP method, GET of a collection
// as LIST, watches as WATCH, apply patches as APPLY and streaming
// subresources as CONNECT. A deletecollection is DELETE, as in kube.
func reportedVerb(r *http.Request, info *requestinfo.Info, scope string) string {
	if info.Verb == "watch" {
		return "WATCH"
	}
	verb := strings.ToUpper(r.Method)
	if verb == http.MethodGet || verb == http.MethodHead {
		verb = http.MethodGet
		if scope != "resource" && scope != "" {
			verb = "LIST"
		}
		if watchQuery(r.URL) {
			verb = "WATCH"
		}
	}
	if verb == http.MethodPatch && r.Header.Get("Content-Type") == "application/apply-patch+yaml" {
		verb = "APPLY"
	}
	if info.IsResourceRequest && connectSubresources[info.Subresource] {
		verb = "CONNECT"
	}
	if !reportedVerbs[verb] {
		return "other"
	}
	return verb
}

// watchQuery reads ?watch= as kube's metrics do: anything but 0 and false
// is a watch.
func watchQuery(u *url.URL) bool {
	values := u.Query()["watch"]
	if len(values) == 0 {
		return false
	}
	v := strings.ToLower(values[0])
	return v != "0" && v != "false"
}

// dryRun is kube's dry_run label: "", the sorted distinct values, or
// "invalid" when a value is not "All".
func dryRun(u *url.URL) string {
	if !strings.Contains(u.RawQuery, "dryRun") {
		return ""
	}
	values := u.Query()["dryRun"]
	for _, v := range values {
		if v != "All" {
			return "invalid"
		}
	}
	slices.Sort(values)
	return strings.Join(slices.Compact(values), ",")
}
