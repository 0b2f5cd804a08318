package audit_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/auditannotation"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/pki"
	"kplane.dev/services/gateway/internal/audit"
	"kplane.dev/services/gateway/internal/audit/backend"
	"kplane.dev/services/gateway/internal/audit/policy"
)

const testPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  nonResourceURLs: ["/healthz*"]
- level: RequestResponse
  resources: [{group: "", resources: ["configmaps"]}]
- level: Metadata
`

// collector is a real HTTPS audit webhook that keeps every EventList it
// takes; while hold is open it answers nothing.
type collector struct {
	*httptest.Server
	ca   []byte
	hold chan struct{}

	mu      sync.Mutex
	batches [][]auditv1.Event
}

func newCollector(t *testing.T, held bool) *collector {
	t.Helper()
	ca, err := pki.NewCA("audit-webhook-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := ca.Serving("audit-webhook", []string{"127.0.0.1"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{ca: ca.CertPEM(), hold: make(chan struct{})}
	if !held {
		close(c.hold)
	}
	c.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-c.hold
		var list auditv1.EventList
		if err := json.NewDecoder(r.Body).Decode(&list); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.batches = append(c.batches, list.Items)
		c.mu.Unlock()
	}))
	c.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate()}}
	c.StartTLS()
	t.Cleanup(c.Close)
	return c
}

func (c *collector) webhook(t *testing.T) *backend.Webhook {
	t.Helper()
	path := filepath.Join(t.TempDir(), "webhook.kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: %q, certificate-authority-data: %s}\ncontexts:\n- name: a\n  context: {cluster: a, user: a}\nusers:\n- name: a\n  user: {}\ncurrent-context: a\n",
		c.URL, base64.StdEncoding.EncodeToString(c.ca))
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := backend.NewWebhook(path, backend.WithInitialBackoff(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func (c *collector) events() []auditv1.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []auditv1.Event
	for _, b := range c.batches {
		all = append(all, b...)
	}
	return all
}

// api serves a few answers kube's API gives, behind WithID, an
// authenticator that takes the user from a header (the gateway's is
// tested with authn itself) and the audit filter.
func api(t *testing.T, a *audit.Auditor) *httptest.Server {
	t.Helper()
	e := echo.New()
	e.Use(audit.WithID)
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			u := &frontproxy.User{Name: r.Header.Get("Test-User"), Groups: []string{"system:authenticated"}}
			c.SetRequest(r.WithContext(frontproxy.WithUser(r.Context(), u)))
			return next(c)
		}
	})
	e.Use(a.Filter)
	e.POST("/api/v1/namespaces/:ns/configmaps", func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		audit.AddAnnotations(c.Request().Context(), "authorization.k8s.io/decision", "allow")
		// As core records admission's annotations, and the gateway
		// trusts core.
		audit.TrustBackend(c.Request().Context())
		auditannotation.Add(auditannotation.WithRecorder(c.Request().Context(), c.Response().Header()), "example.com/webhook", "seen")
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			return err
		}
		obj["metadata"].(map[string]any)["uid"] = "u-1"
		return c.JSON(http.StatusCreated, obj)
	})
	e.GET("/api/v1/namespaces/:ns/secrets/:name", func(c echo.Context) error {
		// An aggregated API server's annotations are not recorded.
		auditannotation.Add(auditannotation.WithRecorder(c.Request().Context(), c.Response().Header()), "example.com/untrusted", "dropped")
		return c.JSON(http.StatusNotFound, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure",
			"message": `secrets "s" not found`, "reason": "NotFound", "code": 404, "details": map[string]any{"name": "s", "kind": "secrets"}})
	})
	e.GET("/api/v1/namespaces/:ns/pods", func(c echo.Context) error {
		c.Response().WriteHeader(http.StatusOK)
		c.Response().Flush()
		_, err := c.Response().Write([]byte(`{"type":"ADDED","object":{}}` + "\n"))
		return err
	})
	e.GET("/healthz", func(c echo.Context) error { return c.String(http.StatusOK, "ok") })
	e.GET("/api/v1/namespaces/:ns/configmaps/:name", func(echo.Context) error { panic("boom") })
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func newAuditor(t *testing.T, reg prometheus.Registerer, b audit.Backend, opts ...audit.Option) *audit.Auditor {
	t.Helper()
	p, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, audit.WithLongRunning(func(info *requestinfo.Info) bool { return info.Verb == "watch" }))
	a, err := audit.New(policy.New(p), []audit.Backend{b}, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func do(t *testing.T, method, url, user, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Test-User", user)
	req.Header.Set("User-Agent", "audit-test")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// summary is what the test checks of an event.
type summary struct {
	Stage, Verb, User, URI, Ref, Status string
	Annotations                         map[string]string
	Request, Response                   string
}

func summarize(ev auditv1.Event) summary {
	s := summary{Stage: string(ev.Stage), Verb: ev.Verb, User: ev.User.Username, URI: ev.RequestURI, Annotations: ev.Annotations}
	if r := ev.ObjectRef; r != nil {
		s.Ref = strings.Join([]string{r.APIGroup, r.APIVersion, r.Resource, r.Namespace, r.Name}, "/")
	}
	if st := ev.ResponseStatus; st != nil {
		s.Status = fmt.Sprintf("%d %s %s %s", st.Code, st.Status, st.Reason, st.Message)
	}
	if ev.RequestObject != nil {
		s.Request = string(ev.RequestObject.Raw)
	}
	if ev.ResponseObject != nil {
		s.Response = string(ev.ResponseObject.Raw)
	}
	return s
}

// TestFilterToWebhook audits requests at each level through the filter
// to a webhook that takes batches of two.
func TestFilterToWebhook(t *testing.T) {
	c := newCollector(t, false)
	reg := prometheus.NewRegistry()
	// The batches wait on a clock that never moves: only full ones go
	// before Close.
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC))
	a := newAuditor(t, reg, audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 100, MaxBatchSize: 2, MaxBatchWait: time.Hour}, audit.WithClock(clk))
	srv := api(t, a)

	resp := do(t, http.MethodPost, srv.URL+"/api/v1/namespaces/default/configmaps", "alice", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`)
	if resp.Header.Get(auditannotation.Header) != "" {
		t.Errorf("the client got the backend's audit annotations")
	}
	id := resp.Header.Get("Audit-ID")
	if id == "" {
		t.Errorf("no Audit-ID in the answer")
	}
	do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/default/secrets/s", "bob", "")
	do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/default/pods?watch=1", "carol", "")
	do(t, http.MethodGet, srv.URL+"/healthz", "dave", "")
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	events := c.events()
	var got []summary
	for _, ev := range events {
		got = append(got, summarize(ev))
	}
	want := []summary{
		{
			Stage: "ResponseComplete", Verb: "create", User: "alice", URI: "/api/v1/namespaces/default/configmaps",
			Ref: "/v1/configmaps/default/c", Status: "201   ",
			Annotations: map[string]string{"authorization.k8s.io/decision": "allow", "example.com/webhook": "seen"},
			Request:     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`,
			Response:    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","uid":"u-1"}}`,
		},
		{Stage: "ResponseComplete", Verb: "get", User: "bob", URI: "/api/v1/namespaces/default/secrets/s", Ref: "/v1/secrets/default/s", Status: `404 Failure NotFound secrets "s" not found`},
		{Stage: "ResponseStarted", Verb: "watch", User: "carol", URI: "/api/v1/namespaces/default/pods?watch=1", Ref: "/v1/pods/default/", Status: "200   "},
		{Stage: "ResponseComplete", Verb: "watch", User: "carol", URI: "/api/v1/namespaces/default/pods?watch=1", Ref: "/v1/pods/default/", Status: "200   "},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if len(events) > 0 && string(events[0].AuditID) != id {
		t.Errorf("audit ID %s, the answer said %s", events[0].AuditID, id)
	}
	for _, ev := range events {
		if !ev.StageTimestamp.Time.Equal(clk.Now()) {
			t.Errorf("stage timestamp %v, want the clock's %v", ev.StageTimestamp, clk.Now())
		}
	}
	c.mu.Lock()
	for _, b := range c.batches {
		if len(b) > 2 {
			t.Errorf("a batch of %d events, over the bound of 2", len(b))
		}
	}
	c.mu.Unlock()
	for level, n := range map[string]float64{"None": 1, "Metadata": 2, "RequestResponse": 1} {
		if got := testutil.ToFloat64(mustCounter(t, reg, "apiserver_audit_level_total", level)); got != n {
			t.Errorf("apiserver_audit_level_total{level=%q} = %v, want %v", level, got, n)
		}
	}
}

// TestFailedAuthentication audits a refused credential as kube does:
// one ResponseStarted event, with no user.
func TestFailedAuthentication(t *testing.T) {
	c := newCollector(t, false)
	a := newAuditor(t, prometheus.NewRegistry(), audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 10, MaxBatchSize: 10})
	e := echo.New()
	e.Use(audit.WithID)
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			err := c.JSON(http.StatusUnauthorized, map[string]any{"kind": "Status", "code": 401})
			a.FailedAuthentication(c)
			return err
		}
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/default/secrets/s", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []summary
	for _, ev := range c.events() {
		got = append(got, summarize(ev))
	}
	want := []summary{{Stage: "ResponseStarted", Verb: "get", URI: "/api/v1/namespaces/default/secrets/s", Ref: "/v1/secrets/default/s", Status: "401   Authentication failed, attempted: bearer"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestPanic audits a handler's panic as kube does, at stage Panic, and
// lets the panic go on.
func TestPanic(t *testing.T) {
	c := newCollector(t, false)
	a := newAuditor(t, prometheus.NewRegistry(), audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 10, MaxBatchSize: 10})
	srv := api(t, a)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if _, err := http.Get(srv.URL + "/api/v1/namespaces/default/configmaps/c"); err == nil {
		t.Errorf("the panic was answered: it did not reach the HTTP server")
	}
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []summary
	for _, ev := range c.events() {
		got = append(got, summarize(ev))
	}
	want := []summary{{Stage: "Panic", Verb: "get", URI: "/api/v1/namespaces/default/configmaps/c", Ref: "/v1/configmaps/default/c",
		Status: "500 Failure InternalError APIServer panic'd: boom"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestProtobufObjects records protobuf bodies as JSON, as kube does.
func TestProtobufObjects(t *testing.T) {
	c := newCollector(t, false)
	a := newAuditor(t, prometheus.NewRegistry(), audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 10, MaxBatchSize: 10})
	e := echo.New()
	e.Use(audit.WithID)
	e.Use(a.Filter)
	e.POST("/api/v1/namespaces/:ns/configmaps", func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return err
		}
		return c.Blob(http.StatusCreated, runtime.ContentTypeProtobuf, body)
	})
	srv := httptest.NewServer(e)
	defer srv.Close()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Data: map[string]string{"k": "v"}}
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	if !ok {
		t.Fatal("no protobuf serializer")
	}
	body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion), cm)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/api/v1/namespaces/default/configmaps", runtime.ContentTypeProtobuf, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	events := c.events()
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	want := `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"p"},"data":{"k":"v"}}`
	for name, obj := range map[string]*runtime.Unknown{"request": events[0].RequestObject, "response": events[0].ResponseObject} {
		if obj == nil || string(obj.Raw) != want {
			t.Errorf("%s object %v, want %s", name, obj, want)
		}
	}
	if ref := events[0].ObjectRef; ref == nil || ref.Name != "p" {
		t.Errorf("objectRef %+v, want the name from the body", ref)
	}
}

// TestClientAuditID keeps the client's Audit-ID, as kube does.
func TestClientAuditID(t *testing.T) {
	c := newCollector(t, false)
	a := newAuditor(t, prometheus.NewRegistry(), audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 10, MaxBatchSize: 10})
	srv := api(t, a)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/default/secrets/s", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Audit-ID", "from-the-client")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Audit-ID"); got != "from-the-client" {
		t.Errorf("Audit-ID answered %q", got)
	}
	if ev := c.events(); len(ev) != 1 || ev[0].AuditID != "from-the-client" {
		t.Errorf("events %v, want one with the client's audit ID", ev)
	}
}

// TestBackpressure holds the webhook: requests still finish within the
// enqueue bound, and what did not fit is counted.
func TestBackpressure(t *testing.T) {
	c := newCollector(t, true)
	reg := prometheus.NewRegistry()
	const wait = 20 * time.Millisecond
	a := newAuditor(t, reg, audit.Backend{Name: "webhook", Sink: c.webhook(t), BufferSize: 2, MaxBatchSize: 1}, audit.WithEnqueueWait(wait))
	srv := api(t, a)
	const requests = 10
	for range requests {
		start := time.Now()
		do(t, http.MethodGet, srv.URL+"/api/v1/namespaces/default/secrets/s", "bob", "")
		// One event a request: a wait for room, and the request.
		if d := time.Since(start); d > wait+time.Second {
			t.Errorf("a request took %v with the backend held", d)
		}
	}
	close(c.hold)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// One event in the webhook when it was held, two in the buffer.
	delivered := len(c.events())
	dropped := testutil.ToFloat64(mustCounter(t, reg, "apiserver_audit_error_total", "webhook"))
	if delivered != 3 || dropped != requests-3 {
		t.Errorf("%d events delivered, %v counted dropped; want 3 and %d", delivered, dropped, requests-3)
	}
	if total := testutil.ToFloat64(mustCounter(t, reg, "apiserver_audit_event_total", "")); total != requests {
		t.Errorf("apiserver_audit_event_total = %v, want %d", total, requests)
	}
}

// mustCounter finds the counter called name with label value v (none
// when v is "") on reg.
func mustCounter(t *testing.T, reg *prometheus.Registry, name, v string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if (v == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == v) {
				return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name}, func() float64 { return m.GetCounter().GetValue() })
			}
		}
	}
	t.Fatalf("no %s{%s} on the registry", name, v)
	return nil
}

// TestPatchAnnotationLevel checks that a mutating webhook's patch, which
// a backend sends among its audit annotations, is recorded only in events
// at level Request and above, as kube records it, while the mutation
// annotation beside it is recorded at Metadata.
func TestPatchAnnotationLevel(t *testing.T) {
	const (
		mutation = "mutation.webhook.admission.k8s.io/round_0_index_0"
		patch    = "patch.webhook.admission.k8s.io/round_0_index_0"
	)
	mutated := `{"configuration":"c","webhook":"w.example.com","mutated":true}`
	patched := `{"configuration":"c","webhook":"w.example.com","patch":[{"op":"add","path":"/data","value":{"a":"b"}}],"patchType":"JSONPatch"}`
	p, err := policy.Parse([]byte("apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n" +
		"- level: Request\n  resources: [{group: \"\", resources: [\"configmaps\"]}]\n- level: Metadata\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(t, false)
	a, err := audit.New(policy.New(p), []audit.Backend{{Name: "webhook", Sink: c.webhook(t), BufferSize: 10, MaxBatchSize: 10}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(audit.WithID)
	e.Use(a.Filter)
	e.POST("/api/v1/namespaces/:ns/:resource", func(c echo.Context) error {
		audit.TrustBackend(c.Request().Context())
		ctx := auditannotation.WithRecorder(c.Request().Context(), c.Response().Header())
		auditannotation.Add(ctx, mutation, mutated)
		auditannotation.Add(ctx, patch, patched)
		return c.JSON(http.StatusCreated, map[string]any{})
	})
	srv := httptest.NewServer(e)
	defer srv.Close()

	do(t, http.MethodPost, srv.URL+"/api/v1/namespaces/default/configmaps", "alice", `{}`)
	do(t, http.MethodPost, srv.URL+"/api/v1/namespaces/default/secrets", "alice", `{}`)
	if err := a.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]string{}
	for _, ev := range c.events() {
		got[string(ev.Level)] = ev.Annotations
	}
	want := map[string]map[string]string{
		"Request":  {mutation: mutated, patch: patched},
		"Metadata": {mutation: mutated},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("annotations by level (-want +got):\n%s", diff)
	}
}
