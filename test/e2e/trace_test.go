package e2e

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// otlpReceiver is an OTLP/HTTP receiver of traces (protobuf), as a
// collector serves it on /v1/traces: it keeps every span it is sent.
type otlpReceiver struct {
	*httptest.Server

	mu    sync.Mutex
	spans []receivedSpan
}

// receivedSpan is what the test reads of a span, with the service.name of
// the resource that sent it.
type receivedSpan struct {
	service                 string
	traceID, spanID, parent string
	name                    string
	kind                    tracepb.Span_SpanKind
	attributes              map[string]string
	statusCode              tracepb.Status_StatusCode
}

func newOTLPReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		http.NotFound(w, req)
		return
	}
	body := io.Reader(req.Body)
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var export coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &export); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var got []receivedSpan
	for _, rs := range export.GetResourceSpans() {
		service := attributes(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				got = append(got, receivedSpan{
					service:    service,
					traceID:    hex.EncodeToString(s.GetTraceId()),
					spanID:     hex.EncodeToString(s.GetSpanId()),
					parent:     hex.EncodeToString(s.GetParentSpanId()),
					name:       s.GetName(),
					kind:       s.GetKind(),
					attributes: attributes(s.GetAttributes()),
					statusCode: s.GetStatus().GetCode(),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// count is how many spans have been received.
func (r *otlpReceiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.spans)
}

// trace is the spans received so far of trace id.
func (r *otlpReceiver) trace(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if s.traceID == id {
			out = append(out, s)
		}
	}
	return out
}

// attributes are kvs with their values as strings.
func attributes(kvs []*commonpb.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			out[kv.GetKey()] = fmt.Sprint(v.GetBoolValue())
		default:
			out[kv.GetKey()] = v.GetStringValue()
		}
	}
	return out
}

// TestTrace runs the whole system with tracing sent to a receiver in the
// test, creates a configmap with the stock kubectl as a service account
// (so that authn and authz are asked) past a validating webhook, and
// finds one trace of that request that covers every hop: the gateway,
// authn, authz, core (its watch cache too), admission, the webhook call
// and etcd, each span a descendant of the gateway's, each sent by the
// service it names.
func TestTrace(t *testing.T) {
	// Spans are sent a tenth of a second after they end rather than five
	// seconds, and nothing in the environment renames the services.
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	t.Setenv("OTEL_SERVICE_NAME", "")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "")
	receiver := newOTLPReceiver(t)
	sys := harness.Start(t, harness.WithTracing(receiver.URL, "http/protobuf", 1_000_000))
	hook := newAdmissionWebhook(t)

	const ns, path = "e2e-trace", "/allow-trace"
	createNamespace(t, sys, ns)
	mustKubectl(t, sys, "label", "namespace", ns, "kplane.test/trace=yes")
	mustKubectl(t, sys, "-n", ns, "create", "serviceaccount", "writer")
	mustKubectl(t, sys, "-n", ns, "create", "role", "cm-writer", "--verb=create", "--resource=configmaps")
	mustKubectl(t, sys, "-n", ns, "create", "rolebinding", "writer-writes", "--role=cm-writer", "--serviceaccount="+ns+":writer")
	config := strings.Replace(hook.configuration("ValidatingWebhookConfiguration", "trace", path, `  namespaceSelector:
    matchLabels:
      kplane.test/trace: "yes"
`), "  objectSelector:\n    matchLabels:\n      kplane.test/case: trace\n", "", 1)
	applyManifest(t, sys, config)

	// The write whose trace is checked is the first one the webhook sees:
	// from then on the configuration has reached admission. Each attempt
	// has a token of its own, which the gateway has never seen, so that
	// neither its token cache nor its decision cache answers for authn
	// and authz.
	var name, traceparent string
	n := 0
	eventuallyKubectl(t, 30*time.Second, func() error {
		n++
		token := strings.TrimSpace(mustKubectl(t, sys, "-n", ns, "create", "token", "writer"))
		name = fmt.Sprintf("traced-%d", n)
		if _, errOut, err := sys.KubectlToken(t, token, "-n", ns, "create", "configmap", name, "--from-literal=a=b"); err != nil {
			return fmt.Errorf("create configmap %s as the service account: %v\n%s", name, err, errOut)
		}
		req, ok := hook.lastOf(path)
		if md, _ := req.Object["metadata"].(map[string]any); !ok || md["name"] != name {
			return fmt.Errorf("the webhook has not seen the create of %s yet", name)
		}
		traceparent = hook.traceparentOf(path)
		return nil
	})
	if t.Failed() {
		t.FailNow()
	}
	// version-traceid-parentid-flags, the parent being admission's client
	// span of the webhook call.
	parts := strings.Split(traceparent, "-")
	if len(parts) != 4 || parts[3] != "01" {
		t.Fatalf("the webhook got traceparent %q, want a sampled W3C trace context", traceparent)
	}
	traceID, webhookParent := parts[1], parts[2]

	var spans []receivedSpan
	if err := eventually(t.Context(), 30*time.Second, func(context.Context) error {
		spans = receiver.trace(traceID)
		return checkTrace(spans, webhookParent, "system:serviceaccount:"+ns+":writer")
	}); err != nil {
		for _, s := range spans {
			t.Logf("span %s %s parent %s %s %q %v", s.service, s.spanID, s.parent, s.kind, s.name, s.attributes)
		}
		t.Fatalf("trace %s of the create of %s: %v", traceID, name, err)
	}

	t.Run("a client's trace is continued", func(t *testing.T) {
		const clientTrace, clientSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
		cfg := sys.RESTConfig(t)
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return withTraceparent{next: rt, value: "00-" + clientTrace + "-" + clientSpan + "-01"}
		})
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Get(t.Context(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := eventually(t.Context(), 30*time.Second, func(context.Context) error {
			spans := receiver.trace(clientTrace)
			gateway := slices.IndexFunc(spans, func(s receivedSpan) bool {
				return s.service == "kplane-gateway" && s.kind == tracepb.Span_SPAN_KIND_SERVER && s.parent == clientSpan && s.name == "get configmaps"
			})
			if gateway < 0 {
				return fmt.Errorf("no gateway span get configmaps under the client's span %s in %d spans", clientSpan, len(spans))
			}
			if !slices.ContainsFunc(spans, func(s receivedSpan) bool { return s.service == "kplane-core" && s.name == "get configmaps" }) {
				return fmt.Errorf("no core span get configmaps in the client's trace")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}

// withTraceparent sends every request with a client's own trace context.
type withTraceparent struct {
	next  http.RoundTripper
	value string
}

func (w withTraceparent) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", w.value)
	return w.next.RoundTrip(r)
}

// wantSpan is a span the trace must hold: sent by service, named name
// (a prefix when prefix is set), a child of a span of parentService when
// that is set.
type wantSpan struct {
	service, name string
	prefix        bool
	parentService string
	attributes    map[string]string
}

// checkTrace says what spans is missing to be the whole trace of a
// create by user: one root, the gateway's server span, every other span
// its descendant, and a span of every hop, each sent by its own service.
func checkTrace(spans []receivedSpan, webhookParent, user string) error {
	byID := map[string]receivedSpan{}
	var roots []receivedSpan
	for _, s := range spans {
		byID[s.spanID] = s
		if s.parent == "" {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		return fmt.Errorf("%d root spans, want the gateway's one", len(roots))
	}
	root := roots[0]
	if root.service != "kplane-gateway" || root.kind != tracepb.Span_SPAN_KIND_SERVER || root.name != "create configmaps" ||
		root.attributes["http.response.status_code"] != "201" || root.attributes["user.name"] != user {
		return fmt.Errorf("root span %s %s %q %v, want the gateway's server span create configmaps of %s answered 201", root.service, root.kind, root.name, root.attributes, user)
	}
	for _, s := range spans {
		// Every span chains to the root through spans of the trace.
		seen := map[string]bool{}
		for at := s; at.parent != ""; {
			if seen[at.spanID] {
				return fmt.Errorf("span %q of %s is in a cycle", s.name, s.service)
			}
			seen[at.spanID] = true
			p, ok := byID[at.parent]
			if !ok {
				return fmt.Errorf("span %q of %s has ancestor %s not (yet) received", s.name, s.service, at.parent)
			}
			at = p
		}
	}
	wants := []wantSpan{
		{service: "kplane-gateway", name: "authenticate"},
		{service: "kplane-gateway", name: "send kplane.authn.tokenreview"},
		{service: "kplane-authn", name: "process kplane.authn.tokenreview", parentService: "kplane-gateway"},
		{service: "kplane-gateway", name: "authorize", attributes: map[string]string{"kplane.authorization.decision": "allow", "kplane.authorization.cache_hit": "false"}},
		{service: "kplane-gateway", name: "send kplane.authz.subjectaccessreview"},
		{service: "kplane-authz", name: "process kplane.authz.subjectaccessreview", parentService: "kplane-gateway"},
		{service: "kplane-gateway", name: "proxy core"},
		{service: "kplane-core", name: "create configmaps", parentService: "kplane-gateway", attributes: map[string]string{"http.response.status_code": "201"}},
		{service: "kplane-core", name: "watchcache get"},
		{service: "kplane-core", name: "send kplane.admission.validate"},
		{service: "kplane-admission", name: "process kplane.admission.validate", parentService: "kplane-core"},
		{service: "kplane-admission", name: "webhook trace.kplane.test", attributes: map[string]string{"kplane.admission.allowed": "true"}},
		{service: "kplane-core", name: "etcdserverpb.KV/", prefix: true, attributes: map[string]string{"rpc.system.name": "grpc"}},
	}
	for _, w := range wants {
		if !slices.ContainsFunc(spans, w.matches(byID)) {
			return fmt.Errorf("no span %q of %s (child of %q, with %v)", w.name, w.service, w.parentService, w.attributes)
		}
	}
	// The webhook was called by admission's HTTP client span, under the
	// span of the webhook call.
	call, ok := byID[webhookParent]
	if !ok {
		return fmt.Errorf("the span %s that called the webhook was not received", webhookParent)
	}
	if p := byID[call.parent]; call.service != "kplane-admission" || call.kind != tracepb.Span_SPAN_KIND_CLIENT || p.name != "webhook trace.kplane.test" {
		return fmt.Errorf("the webhook was called by span %s %s %q under %q, want admission's client span under the webhook call", call.service, call.kind, call.name, p.name)
	}
	return nil
}

// matches is whether a span is w, its parent looked up in byID.
func (w wantSpan) matches(byID map[string]receivedSpan) func(receivedSpan) bool {
	return func(s receivedSpan) bool {
		if s.service != w.service || (s.name != w.name && !(w.prefix && strings.HasPrefix(s.name, w.name))) {
			return false
		}
		if w.parentService != "" && byID[s.parent].service != w.parentService {
			return false
		}
		for k, v := range w.attributes {
			if s.attributes[k] != v {
				return false
			}
		}
		return true
	}
}
