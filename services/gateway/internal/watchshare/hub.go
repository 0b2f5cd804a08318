package watchshare

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
)

// Hub holds the shared streams of one gateway.
type Hub struct {
	log     *slog.Logger
	limits  Limits
	metrics *hubMetrics

	mu      sync.Mutex
	streams map[key][]*stream
}

// Limits bound what a stream keeps for watchers joining later, and how
// far a watcher may fall behind.
type Limits struct {
	// History is how many of its last events a stream of
	// resourceVersion=N keeps.
	History int
	// StateBytes is how large the state of a stream of resourceVersion=0
	// may grow; past it the stream takes no new watchers.
	StateBytes int
	// Buffer is how many events a watcher may have waiting before it is
	// ended.
	Buffer int
}

// DefaultLimits keep a second or so of a busy resource's events, state
// for a namespace of a few thousand small objects, and kube-apiserver's
// own bound on a watcher's backlog.
var DefaultLimits = Limits{History: 1000, StateBytes: 16 << 20, Buffer: 1000}

// New returns a Hub whose metrics go to reg.
func New(log *slog.Logger, reg prometheus.Registerer, limits Limits) (*Hub, error) {
	m, err := newHubMetrics(reg)
	if err != nil {
		return nil, err
	}
	// A history keeps at least the last event, a watcher waits for at
	// least one.
	limits.History, limits.Buffer = max(limits.History, 1), max(limits.Buffer, 1)
	return &Hub{log: log, limits: limits, metrics: m, streams: map[key][]*stream{}}, nil
}

// key is what watches sharing a stream have in common.
type key struct {
	backend http.RoundTripper
	path    string
	query   string
	accept  string
	state   bool
}

// request is a watch the hub can serve.
type request struct {
	key
	// from is the resourceVersion a watch of resourceVersion=N starts
	// after.
	from      int64
	timeout   time.Duration
	bookmarks bool
}

// sharedParams are the query parameters a shared watch may carry; the
// ones that vary between watchers of one stream are left out of its key.
var sharedParams = map[string]bool{
	"watch": true, "resourceVersion": true, "timeoutSeconds": true, "allowWatchBookmarks": true,
	"labelSelector": true, "fieldSelector": true,
}

// accepts are the Accept headers of clients that take the objects
// themselves, as JSON or protobuf: client-go's, and those of plain HTTP
// clients. Other media types (tables, metadata only) change what an
// event holds.
var accepts = []string{
	"", "*/*", "application/json", "application/json, */*",
	"application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf, application/json",
	"application/vnd.kubernetes.protobuf",
}

// parse returns r as a watch the hub can serve to backend, or false.
func parse(r *http.Request, backend http.RoundTripper) (request, bool) {
	if r.Method != http.MethodGet || r.ContentLength > 0 {
		return request{}, false
	}
	accept := strings.Join(r.Header.Values("Accept"), ", ")
	if !slices.Contains(accepts, accept) {
		return request{}, false
	}
	q := r.URL.Query()
	for name, vals := range q {
		if !sharedParams[name] || len(vals) != 1 {
			return request{}, false
		}
	}
	req := request{key: key{backend: backend, path: r.URL.Path, accept: accept}}
	switch rv := q.Get("resourceVersion"); rv {
	case "0":
		req.state = true
	default:
		n, err := strconv.ParseInt(rv, 10, 64)
		if err != nil || n <= 0 {
			// Unset asks for the latest state, which only the store
			// has; anything else is the backend's to refuse.
			return request{}, false
		}
		req.from = n
	}
	if t := q.Get("timeoutSeconds"); t != "" {
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || n < 0 {
			return request{}, false
		}
		req.timeout = time.Duration(n) * time.Second
	}
	switch q.Get("allowWatchBookmarks") {
	case "true":
		req.bookmarks = true
	case "", "false":
	default:
		return request{}, false
	}
	shared := url.Values{}
	for _, name := range []string{"labelSelector", "fieldSelector"} {
		if v, ok := q[name]; ok {
			shared[name] = v
		}
	}
	if _, ok := q["watch"]; ok {
		shared.Set("watch", "true")
	}
	req.query = shared.Encode()
	return req, true
}

// Serve answers the watch r to backend as user u, sharing its stream when
// it can, and reports whether it did: false leaves r, untouched, to the
// caller to proxy.
func (h *Hub) Serve(w http.ResponseWriter, r *http.Request, backend http.RoundTripper, u *frontproxy.User) bool {
	req, ok := parse(r, backend)
	if !ok {
		return false
	}
	for {
		s, joined, err := h.join(r, req, u)
		if err != nil {
			// The upstream did not open as a stream to share: its answer
			// is this watcher's.
			passThrough(w, r, err.(*refused), h.log)
			return true
		}
		if s == nil {
			// The stream it waited for failed to open; try again.
			continue
		}
		h.serve(w, r, req, s, joined)
		return true
	}
}

// join finds or opens the stream req can share, and registers a watcher
// on it. A nil stream asks the caller to try again: the stream it waited
// on did not open.
func (h *Hub) join(r *http.Request, req request, u *frontproxy.User) (*stream, *watcher, error) {
	h.mu.Lock()
	for _, s := range h.streams[req.key] {
		select {
		case <-s.opened:
		default:
			// The stream is opening: wait for it, and look again.
			h.mu.Unlock()
			select {
			case <-s.opened:
			case <-r.Context().Done():
				return nil, nil, &refused{err: r.Context().Err()}
			}
			return nil, nil, nil
		}
		if w := s.add(req, h.limits.Buffer); w != nil {
			h.mu.Unlock()
			h.metrics.joined.Inc()
			return s, w, nil
		}
	}
	s := newStream(h, req)
	h.streams[req.key] = append(h.streams[req.key], s)
	h.mu.Unlock()

	if err := s.open(r, u); err != nil {
		h.remove(s)
		close(s.opened)
		return nil, nil, err
	}
	w := s.add(req, h.limits.Buffer)
	close(s.opened)
	h.metrics.upstreams.Inc()
	go s.run()
	return s, w, nil
}

// remove takes s out of the streams watchers may join.
func (h *Hub) remove(s *stream) {
	h.mu.Lock()
	defer h.mu.Unlock()
	list := h.streams[s.key]
	if i := slices.Index(list, s); i >= 0 {
		list = slices.Delete(list, i, i+1)
	}
	if len(list) == 0 {
		delete(h.streams, s.key)
	} else {
		h.streams[s.key] = list
	}
}

// serve writes the stream's events to w until the watcher's stream ends,
// its timeout passes or its client goes away.
func (h *Hub) serve(w http.ResponseWriter, r *http.Request, req request, s *stream, wt *watcher) {
	defer s.leave(wt)
	header := w.Header()
	for name, vals := range s.header {
		header[name] = slices.Clone(vals)
	}
	w.WriteHeader(http.StatusOK)
	flush := http.NewResponseController(w)
	if err := flush.Flush(); err != nil {
		return
	}
	var timeout <-chan time.Time
	if req.timeout > 0 {
		t := time.NewTimer(req.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case data, ok := <-wt.events:
			if !ok {
				return
			}
			if _, err := w.Write(data); err != nil {
				return
			}
			// Events already waiting go out in the same write.
			for more := true; more; {
				select {
				case data, ok := <-wt.events:
					if !ok {
						_ = flush.Flush()
						return
					}
					if _, err := w.Write(data); err != nil {
						return
					}
				default:
					more = false
				}
			}
			if err := flush.Flush(); err != nil {
				return
			}
		case <-timeout:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// refused is an upstream answer that is not a stream to share, or the
// failure to get one, which goes to the watcher that asked.
type refused struct {
	resp *http.Response
	err  error
}

func (e *refused) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "upstream answered " + e.resp.Status
}

// passThrough gives the watcher the upstream's own answer, as the proxy
// would have.
func passThrough(w http.ResponseWriter, r *http.Request, e *refused, log *slog.Logger) {
	if e.resp == nil {
		if r.Context().Err() != nil {
			return
		}
		log.Warn("backend unreachable", "method", r.Method, "path", r.URL.Path, "err", e.err)
		if err := apistatus.WriteHTTP(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", e.err))); err != nil {
			log.Debug("write backend error", "err", err)
		}
		return
	}
	defer func() { _ = e.resp.Body.Close() }()
	copyHeader(w.Header(), e.resp.Header)
	w.WriteHeader(e.resp.StatusCode)
	flush := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := e.resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = flush.Flush()
		}
		if err != nil {
			return
		}
	}
}

// hopHeaders are the headers that describe one connection, not the
// answer, which a proxy does not pass on.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Content-Length"}

func copyHeader(dst, src http.Header) {
	for name, vals := range src {
		if slices.Contains(hopHeaders, name) {
			continue
		}
		dst[name] = slices.Clone(vals)
	}
}

// stream is one upstream watch and the watchers sharing it.
type stream struct {
	hub *Hub
	key key
	// opened is closed once the upstream answered, or failed to.
	opened chan struct{}
	header http.Header
	codec  codec
	body   io.ReadCloser
	cancel context.CancelFunc

	mu       sync.Mutex
	watchers map[*watcher]struct{}
	// ended is set when the upstream ended or its last watcher left: the
	// stream takes no new watchers.
	ended bool
	// Of a stream from resourceVersion=N: every change after from is in
	// history or still to come, and every change up to last has come.
	// history is a ring whose oldest event is at head once it is full.
	from, last int64
	history    []event
	head       int
	// Of a stream from resourceVersion=0 (stateful): the objects its
	// events leave, by namespace and name, and their size; nil once too
	// large. They are framed as ADDED events only for a watcher joining.
	stateful   bool
	state      map[string][]byte
	stateBytes int
}

// event is one event of a stream as the backend framed it.
type event struct {
	data []byte
	rv   int64
}

// watcher is one client's share of a stream.
type watcher struct {
	events    chan []byte
	bookmarks bool
}

func newStream(h *Hub, req request) *stream {
	s := &stream{hub: h, key: req.key, opened: make(chan struct{}), watchers: map[*watcher]struct{}{}, from: req.from, last: req.from}
	if req.state {
		s.stateful, s.state = true, map[string][]byte{}
	}
	return s
}

// open sends the upstream watch, as u, on behalf of the first watcher r.
func (s *stream) open(r *http.Request, u *frontproxy.User) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	out := r.Clone(ctx)
	out.URL.Scheme, out.URL.Host = "https", "backend"
	out.Host = ""
	q := out.URL.Query()
	// The stream outlives its first watcher's timeout, and its position
	// keeps up with the store through bookmarks.
	q.Del("timeoutSeconds")
	q.Set("allowWatchBookmarks", "true")
	out.URL.RawQuery = q.Encode()
	out.Header.Del("Accept-Encoding")
	frontproxy.SetHeaders(out.Header, u)
	out.Body = nil
	out.ContentLength = 0
	resp, err := s.key.backend.RoundTrip(out)
	if err != nil {
		cancel()
		return &refused{err: err}
	}
	c, ok := newCodec(resp.Header.Get("Content-Type"), resp.Body)
	if resp.StatusCode != http.StatusOK || !ok || resp.Header.Get("Content-Encoding") != "" {
		// An error, or a stream the hub cannot read: the first watcher
		// gets it as it is, and the stream is not shared. The answer
		// keeps its context until the watcher is done with it.
		resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
		return &refused{resp: resp}
	}
	s.header = http.Header{}
	copyHeader(s.header, resp.Header)
	s.codec, s.body, s.cancel = c, resp.Body, cancel
	return nil
}

// cancelOnClose ends the context of an answer once its reader is done
// with it.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	defer c.cancel()
	return c.ReadCloser.Close()
}

// add registers a watcher of req, with what it needs to catch up
// already waiting, or returns nil when s cannot take it.
func (s *stream) add(req request, buffer int) *watcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return nil
	}
	var backlog [][]byte
	switch {
	case req.state:
		if s.state == nil {
			return nil
		}
		names := make([]string, 0, len(s.state))
		for name := range s.state {
			names = append(names, name)
		}
		// In the store's order, as the backend lists a state.
		slices.Sort(names)
		for _, name := range names {
			added, err := s.codec.added(s.state[name])
			if err != nil {
				// A state it cannot replay is no state to join.
				s.hub.log.Info("shared watch cannot replay its state", "path", s.key.path, "err", err)
				return nil
			}
			backlog = append(backlog, added)
		}
	default:
		if req.from < s.from || req.from > s.last {
			return nil
		}
		for i := range s.history {
			if e := s.history[(s.head+i)%len(s.history)]; e.rv > req.from {
				backlog = append(backlog, e.data)
			}
		}
	}
	w := &watcher{events: make(chan []byte, len(backlog)+buffer), bookmarks: req.bookmarks}
	for _, data := range backlog {
		w.events <- data
	}
	s.watchers[w] = struct{}{}
	return w
}

// leave unregisters w; the last watcher to leave ends the upstream,
// also one that failed and that the backend has yet to close.
func (s *stream) leave(w *watcher) {
	s.mu.Lock()
	delete(s.watchers, w)
	last := len(s.watchers) == 0
	s.ended = s.ended || last
	s.mu.Unlock()
	if last {
		s.hub.remove(s)
		s.cancel()
	}
}

// run reads the upstream's events and hands them to the watchers until
// the upstream ends.
func (s *stream) run() {
	defer s.hub.metrics.upstreams.Dec()
	defer s.end()
	for {
		frame, ev, err := s.codec.read()
		if err != nil {
			if err != io.EOF && !s.endedByWatchers() {
				s.hub.log.Info("backend ended a shared watch", "path", s.key.path, "err", err)
			}
			return
		}
		if !s.deliver(frame, ev) {
			return
		}
	}
}

// deliver records one event and hands it to every watcher that takes
// it; it reports whether the stream goes on.
func (s *stream) deliver(data []byte, ev header) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended && len(s.watchers) == 0 {
		return false
	}
	rv, _ := strconv.ParseInt(ev.version, 10, 64)
	bookmark := ev.typ == "BOOKMARK"
	switch {
	case ev.typ == "ERROR":
		// The backend ends the stream after it; nobody may join a
		// stream that failed.
		s.ended = true
	case s.stateful && s.state != nil:
		name := ev.namespace + "/" + ev.name
		switch ev.typ {
		case "ADDED", "MODIFIED":
			s.stateBytes += len(ev.object) - len(s.state[name])
			s.state[name] = ev.object
		case "DELETED":
			s.stateBytes -= len(s.state[name])
			delete(s.state, name)
		}
		if s.state != nil && s.stateBytes > s.hub.limits.StateBytes {
			s.state = nil
		}
	case !s.stateful:
		if rv > s.last {
			s.last = rv
		}
		switch {
		case bookmark:
		case len(s.history) < s.hub.limits.History:
			s.history = append(s.history, event{data: data, rv: rv})
		default:
			s.from = s.history[s.head].rv
			s.history[s.head] = event{data: data, rv: rv}
			s.head = (s.head + 1) % len(s.history)
		}
	}
	for w := range s.watchers {
		if bookmark && !w.bookmarks {
			continue
		}
		select {
		case w.events <- data:
		default:
			// Behind by a whole buffer: its response ends, and its
			// client watches again from what it has.
			delete(s.watchers, w)
			close(w.events)
			s.hub.metrics.overflows.Inc()
		}
	}
	return true
}

func (s *stream) endedByWatchers() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended && len(s.watchers) == 0
}

// end closes the upstream and ends every watcher's response after the
// events it has waiting.
func (s *stream) end() {
	s.mu.Lock()
	s.ended = true
	for w := range s.watchers {
		delete(s.watchers, w)
		close(w.events)
	}
	s.mu.Unlock()
	s.hub.remove(s)
	s.cancel()
	_ = s.body.Close()
}

// hubMetrics count what sharing saves.
type hubMetrics struct {
	upstreams prometheus.Gauge
	joined    prometheus.Counter
	overflows prometheus.Counter
}

func newHubMetrics(reg prometheus.Registerer) (*hubMetrics, error) {
	m := &hubMetrics{
		upstreams: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "kplane", Subsystem: "gateway", Name: "shared_watch_upstreams",
			Help: "Upstream watches open for watches the gateway shares.",
		}),
		joined: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "gateway", Name: "shared_watch_joins_total",
			Help: "Watches served from an upstream watch already open.",
		}),
		overflows: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "kplane", Subsystem: "gateway", Name: "shared_watch_overflows_total",
			Help: "Watchers of a shared watch ended because they fell a whole buffer behind.",
		}),
	}
	for _, c := range []prometheus.Collector{m.upstreams, m.joined, m.overflows} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register shared watch metrics: %w", err)
		}
	}
	return m, nil
}
