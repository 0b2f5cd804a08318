package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/deploy/launcher"
	"kplane.dev/test/e2e/harness"
)

const (
	auditNamespace = "audit-e2e"
	// auditPrefix starts the Audit-ID of every request the scenario
	// compares: each request names its own, as kube lets a client do.
	auditPrefix = "audit-e2e-"
	// auditKubeEvents are the events the reference kube-apiserver wrote
	// for the scenario, normalised; TestAuditCaptureKube writes them.
	auditKubeEvents = "testdata/audit/kube-events.json"
	auditPolicy     = "testdata/audit/policy.yaml"
	// auditUserAgent is the scenario's user agent; managedFields name it.
	auditUserAgent = "kplane-audit-e2e"
)

// auditStep is one request of the scenario.
type auditStep struct {
	id, method, path, body string
	header                 map[string]string
	want                   int
}

// auditScenario is what TestAudit compares: a create, a read denied by
// RBAC to an impersonated user, a create by an impersonated
// system:masters user, a watch, and a create a validating webhook
// refuses.
var auditScenario = []auditStep{
	{id: "1-create", method: http.MethodPost, path: "/api/v1/namespaces/audit-e2e/configmaps",
		body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"audit-created","labels":{"a":"b"}},"data":{"k":"v"}}`, want: http.StatusCreated},
	{id: "2-denied", method: http.MethodGet, path: "/api/v1/namespaces/audit-e2e/configmaps/audit-created",
		header: map[string]string{"Impersonate-User": "audit-nobody"}, want: http.StatusForbidden},
	{id: "3-impersonated", method: http.MethodPost, path: "/api/v1/namespaces/audit-e2e/secrets",
		body:   `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"audit-secret"},"stringData":{"k":"v"}}`,
		header: map[string]string{"Impersonate-User": "audit-admin", "Impersonate-Group": "system:masters"}, want: http.StatusCreated},
	{id: "4-watch", method: http.MethodGet, path: "/api/v1/namespaces/audit-e2e/configmaps?watch=true&timeoutSeconds=1", want: http.StatusOK},
	{id: "5-webhook-denied", method: http.MethodPost, path: "/api/v1/namespaces/audit-e2e/configmaps",
		body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"audit-denied","labels":{"audit-e2e":"deny"}}}`, want: http.StatusBadRequest},
}

// auditWebhookConfiguration refuses creates of configmaps labelled
// audit-e2e=deny, through hook's /deny-audited, which adds an audit
// annotation.
func auditWebhookConfiguration(hook *admissionWebhook) string {
	return fmt.Sprintf(`{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration",
"metadata":{"name":"audit-e2e"},
"webhooks":[{"name":"deny.audit-e2e.kplane.test","clientConfig":{"url":%q,"caBundle":%q},
"rules":[{"operations":["CREATE"],"apiGroups":[""],"apiVersions":["v1"],"resources":["configmaps"]}],
"objectSelector":{"matchLabels":{"audit-e2e":"deny"}},
"admissionReviewVersions":["v1"],"sideEffects":"None"}]}`, hook.URL+"/deny-audited", base64.StdEncoding.EncodeToString(hook.caBundle))
}

// send makes one request as cfg's user and returns its status and body.
func send(t *testing.T, client *http.Client, host, id, method, path, body string, header map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, host+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("User-Agent", auditUserAgent)
	req.Header.Set("Accept", "application/json")
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if id != "" {
		req.Header.Set("Audit-ID", id)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	if id != "" && resp.Header.Get("Audit-ID") != id {
		t.Errorf("%s %s: Audit-ID %q answered, want the client's %q", method, path, resp.Header.Get("Audit-ID"), id)
	}
	return resp.StatusCode, out
}

// runAuditScenario sets up the namespace and the webhook on the server
// of cfg and makes the scenario's requests.
func runAuditScenario(t *testing.T, cfg *rest.Config) {
	t.Helper()
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hook := newAdmissionWebhook(t)
	// A configuration left by an earlier run names a webhook gone.
	if code, out := send(t, client, cfg.Host, "", http.MethodDelete, "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/audit-e2e", "", nil); code != http.StatusOK && code != http.StatusNotFound {
		t.Fatalf("delete an earlier webhook configuration: %d %s", code, out)
	}
	for _, setup := range []struct{ path, body string }{
		{"/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"audit-e2e"}}`},
		{"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", auditWebhookConfiguration(hook)},
	} {
		// A server that ran the scenario before has them already.
		if code, out := send(t, client, cfg.Host, "", http.MethodPost, setup.path, setup.body, nil); code != http.StatusCreated && code != http.StatusConflict {
			t.Fatalf("create %s: %d %s", setup.path, code, out)
		}
	}
	// The webhook takes effect once admission has read its
	// configuration: dry runs ask it until it refuses (with kube's 400,
	// as its refusal names no code).
	deadline := time.Now().Add(time.Minute)
	for {
		code, out := send(t, client, cfg.Host, "", http.MethodPost, "/api/v1/namespaces/audit-e2e/configmaps?dryRun=All",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"audit-probe","labels":{"audit-e2e":"deny"}}}`, nil)
		if strings.Contains(string(out), "denied the request") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the webhook refused no write within a minute (last answer %d %s)", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, s := range auditScenario {
		if code, out := send(t, client, cfg.Host, auditPrefix+s.id, s.method, s.path, s.body, s.header); code != s.want {
			t.Fatalf("%s: answered %d, want %d: %s", s.id, code, s.want, out)
		}
	}
}

// stageOrder sorts a request's events as they happen.
var stageOrder = []string{"RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"}

// readAuditEvents reads the scenario's events from the audit log at
// path, normalised, once every request's ResponseComplete is there.
func readAuditEvents(t *testing.T, path, admin string) []map[string]any {
	t.Helper()
	var events []map[string]any
	deadline := time.Now().Add(30 * time.Second)
	for {
		events = nil
		complete := map[string]bool{}
		data, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("audit log line %q: %v", sc.Text(), err)
			}
			id, _ := ev["auditID"].(string)
			if !strings.HasPrefix(id, auditPrefix) {
				continue
			}
			if ev["stage"] == "ResponseComplete" {
				complete[id] = true
			}
			events = append(events, normaliseAuditEvent(ev, admin))
		}
		if len(complete) == len(auditScenario) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests complete in the audit log %s", len(complete), len(auditScenario), path)
		}
		time.Sleep(100 * time.Millisecond)
	}
	slices.SortStableFunc(events, func(a, b map[string]any) int {
		if c := strings.Compare(a["auditID"].(string), b["auditID"].(string)); c != 0 {
			return c
		}
		return slices.Index(stageOrder, a["stage"].(string)) - slices.Index(stageOrder, b["stage"].(string))
	})
	return events
}

// normaliseAuditEvent drops what differs between any two runs: times,
// addresses, user agents, UIDs and resourceVersions; and names the
// admin, who is a different user on each server, "<admin>".
func normaliseAuditEvent(ev map[string]any, admin string) map[string]any {
	for _, k := range []string{"requestReceivedTimestamp", "stageTimestamp", "sourceIPs", "userAgent"} {
		delete(ev, k)
	}
	if u, ok := ev["user"].(map[string]any); ok && u["username"] == admin {
		u["username"] = "<admin>"
		delete(u, "uid")
	}
	if ref, ok := ev["objectRef"].(map[string]any); ok {
		delete(ref, "uid")
		delete(ref, "resourceVersion")
	}
	for _, k := range []string{"requestObject", "responseObject"} {
		obj, ok := ev[k].(map[string]any)
		if !ok {
			continue
		}
		md, ok := obj["metadata"].(map[string]any)
		if !ok {
			continue
		}
		for _, f := range []string{"uid", "resourceVersion", "creationTimestamp"} {
			delete(md, f)
		}
		if mf, ok := md["managedFields"].([]any); ok {
			for _, e := range mf {
				if m, ok := e.(map[string]any); ok {
					delete(m, "time")
				}
			}
		}
	}
	return ev
}

// TestAudit runs the scenario on kplane, with the policy the reference
// kube-apiserver ran it with, and compares the gateway's audit log with
// kube's events field by field.
func TestAudit(t *testing.T) {
	policy, err := filepath.Abs(auditPolicy)
	if err != nil {
		t.Fatal(err)
	}
	sys := harness.Start(t, harness.WithArgs("gateway", "--audit-policy-file="+policy))
	if sys.Ports["gateway"] == 0 {
		t.Skip("needs the gateway's audit log, which a system the test did not start does not share")
	}
	runAuditScenario(t, sys.RESTConfig(t))
	got := readAuditEvents(t, filepath.Join(sys.DataDir, "logs", launcher.AuditLogFile), launcher.AdminUser)

	data, err := os.ReadFile(auditKubeEvents)
	if err != nil {
		t.Fatal(err)
	}
	var want []map[string]any
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kplane's audit events differ from kube-apiserver's (-kube +kplane):\n%s", diff)
	}
}

// TestAuditCaptureKube writes kube's events of the scenario: run the
// reference kube-apiserver with the scenario's policy and a log, then
//
//	KPLANE_AUDIT_KUBECONFIG=<its kubeconfig> KPLANE_AUDIT_LOG=<its log> go test ./e2e -run TestAuditCaptureKube
//
// Its admin is the anchor's, "admin".
func TestAuditCaptureKube(t *testing.T) {
	kc, log := os.Getenv("KPLANE_AUDIT_KUBECONFIG"), os.Getenv("KPLANE_AUDIT_LOG")
	if kc == "" || log == "" {
		t.Skip("captures kube's events only when KPLANE_AUDIT_KUBECONFIG and KPLANE_AUDIT_LOG name a reference kube-apiserver")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	runAuditScenario(t, cfg)
	events := readAuditEvents(t, log, "admin")
	out, err := json.MarshalIndent(events, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auditKubeEvents, append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAuditDefaultPolicy checks the policy make up writes: secrets at
// Metadata (never their data), other writes at Request, other reads and
// health checks not at all.
func TestAuditDefaultPolicy(t *testing.T) {
	sys := harness.Start(t)
	if sys.Ports["gateway"] == 0 {
		t.Skip("needs the gateway's audit log, which a system the test did not start does not share")
	}
	client, err := rest.HTTPClientFor(sys.RESTConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	host := sys.RESTConfig(t).Host
	for _, s := range []auditStep{
		{id: "secret", method: http.MethodPost, path: "/api/v1/namespaces/default/secrets",
			body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"},"stringData":{"password":"hunter2"}}`, want: http.StatusCreated},
		{id: "serviceaccount", method: http.MethodPost, path: "/api/v1/namespaces/default/serviceaccounts",
			body: `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"robot"}}`, want: http.StatusCreated},
		{id: "read", method: http.MethodGet, path: "/api/v1/namespaces/default/serviceaccounts/robot", want: http.StatusOK},
		{id: "health", method: http.MethodGet, path: "/readyz", want: http.StatusOK},
		{id: "discovery", method: http.MethodGet, path: "/api/v1", want: http.StatusOK},
	} {
		if code, out := send(t, client, host, auditPrefix+s.id, s.method, s.path, s.body, s.header); code != s.want {
			t.Fatalf("%s: answered %d, want %d: %s", s.id, code, s.want, out)
		}
	}
	path := filepath.Join(sys.DataDir, "logs", launcher.AuditLogFile)
	want := map[string]string{auditPrefix + "secret": "Metadata", auditPrefix + "serviceaccount": "Request"}
	var got map[string]string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got = map[string]string{}
		data, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			var ev struct {
				AuditID, Level, Stage string
				RequestObject         json.RawMessage
			}
			if err := json.Unmarshal(line, &ev); err != nil {
				t.Fatalf("audit log line %q: %v", line, err)
			}
			if !strings.HasPrefix(ev.AuditID, auditPrefix) {
				continue
			}
			if ev.Stage != "ResponseComplete" {
				t.Errorf("%s: stage %s logged; the default policy omits RequestReceived", ev.AuditID, ev.Stage)
			}
			if bytes.Contains(line, []byte("hunter2")) || bytes.Contains(line, []byte("aHVudGVyMg")) {
				t.Errorf("%s: the secret's data is in the audit log", ev.AuditID)
			}
			if (ev.Level == "Request") != (len(ev.RequestObject) > 0) {
				t.Errorf("%s at level %s: request object %s", ev.AuditID, ev.Level, ev.RequestObject)
			}
			got[ev.AuditID] = ev.Level
		}
		if len(got) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audited requests and levels (-want +got):\n%s", diff)
	}
}
