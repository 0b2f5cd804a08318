package security

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/test/e2e/harness"
)

// The tenants' namespaces: the attackers live in tenantNS and aim at
// victimNS and at cluster-scoped objects.
const (
	tenantNS = "tenant-a"
	victimNS = "tenant-b"
)

// The tenant's service accounts, each holding exactly the rights its name
// says, granted in tenantNS only.
const (
	viewer  = "viewer"  // ClusterRole view through a RoleBinding
	patcher = "patcher" // get, patch and update configmaps, leases and notes, no create
	lister  = "lister"  // list configmaps, no watch
	nsadmin = "nsadmin" // every verb on "namespaces", through a Role
	writer  = "writer"  // every verb on configmaps
)

// tenantRBAC grants the service accounts above their rights, and defines
// the custom resource they are granted rights on (notes).
const tenantRBAC = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: notes.tenant.example.com}
spec:
  group: tenant.example.com
  scope: Namespaced
  names: {plural: notes, singular: note, kind: Note}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, properties: {text: {type: string}}}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: viewer, namespace: tenant-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: patcher, namespace: tenant-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: lister, namespace: tenant-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: nsadmin, namespace: tenant-a}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: writer, namespace: tenant-a}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: viewer, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
subjects: [{kind: ServiceAccount, name: viewer, namespace: tenant-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: patcher, namespace: tenant-a}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [get, patch, update]}, {apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get, patch, update]}, {apiGroups: [tenant.example.com], resources: [notes], verbs: [get, patch, update]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: patcher, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: patcher}
subjects: [{kind: ServiceAccount, name: patcher, namespace: tenant-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: lister, namespace: tenant-a}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: lister, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: lister}
subjects: [{kind: ServiceAccount, name: lister, namespace: tenant-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: nsadmin, namespace: tenant-a}
rules: [{apiGroups: [""], resources: [namespaces], verbs: ["*"]}, {apiGroups: [rbac.authorization.k8s.io], resources: ["*"], verbs: [get, list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: nsadmin, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: nsadmin}
subjects: [{kind: ServiceAccount, name: nsadmin, namespace: tenant-a}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: writer, namespace: tenant-a}
rules: [{apiGroups: [""], resources: [configmaps], verbs: ["*"]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: writer, namespace: tenant-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: writer}
subjects: [{kind: ServiceAccount, name: writer, namespace: tenant-a}]
`

// world is a running kplane with the tenants set up.
type world struct {
	sys    *harness.System
	tokens map[string]string
	// client talks to the gateway with no credential of its own: each
	// request says who it is.
	client *http.Client
}

// setUp starts kplane with the gateway's args, creates the namespaces and
// the tenant's service accounts, and waits until authz knows their rights.
func setUp(t *testing.T, gatewayArgs ...string) *world {
	t.Helper()
	var opts []harness.Option
	if len(gatewayArgs) > 0 {
		opts = append(opts, harness.WithArgs("gateway", gatewayArgs...))
	}
	sys := harness.Start(t, opts...)
	w := &world{sys: sys, tokens: map[string]string{}, client: httpClient(t, sys.CAFile())}
	for _, ns := range []string{tenantNS, victimNS} {
		kubectl(t, sys, "create", "namespace", ns)
	}
	rbac := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(rbac, []byte(tenantRBAC), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, sys, "apply", "-f", rbac)
	kubectl(t, sys, "wait", "--for=condition=Established", "crd/notes.tenant.example.com", "--timeout=60s")
	kubectl(t, sys, "-n", victimNS, "create", "configmap", "secret-plans", "--from-literal=plan=world-domination")
	for _, sa := range []string{viewer, patcher, lister, nsadmin, writer} {
		w.tokens[sa] = strings.TrimSpace(kubectl(t, sys, "-n", tenantNS, "create", "token", sa, "--duration=1h"))
	}
	// Each grant is visible once authz's informers have it.
	w.waitAllowed(t, viewer, "list", "configmaps", tenantNS)
	w.waitAllowed(t, patcher, "patch", "configmaps", tenantNS)
	w.waitAllowed(t, lister, "list", "configmaps", tenantNS)
	w.waitAllowed(t, nsadmin, "delete", "namespaces", tenantNS)
	w.waitAllowed(t, writer, "create", "configmaps", tenantNS)
	return w
}

func kubectl(t *testing.T, sys *harness.System, args ...string) string {
	t.Helper()
	out, errOut, err := sys.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func httpClient(t *testing.T, caFile string) *http.Client {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 16},
		Timeout:   time.Minute,
	}
}

// waitAllowed waits until a SelfSubjectAccessReview as sa allows verb on
// resource in ns.
func (w *world) waitAllowed(t *testing.T, sa, verb, resource, ns string) {
	t.Helper()
	review := fmt.Sprintf(`{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"namespace":%q,"verb":%q,"resource":%q}}}`, ns, verb, resource)
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp := w.do(t, sa, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", strings.NewReader(review), "application/json")
		var got struct {
			Status struct{ Allowed bool } `json:"status"`
		}
		if resp.code == http.StatusCreated && json.Unmarshal(resp.body, &got) == nil && got.Status.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became allowed to %s %s in %s: %d %s", sa, verb, resource, ns, resp.code, resp.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// response is an answer read whole.
type response struct {
	code   int
	header http.Header
	body   []byte
}

// status decodes the body as a Status; the zero Status when it is not one.
func (r response) status() metav1.Status {
	var s metav1.Status
	if err := json.Unmarshal(r.body, &s); err != nil || s.Kind != "Status" {
		return metav1.Status{}
	}
	return s
}

// do sends a request as the service account sa (anonymous when sa is "")
// with body of contentType.
func (w *world) do(t *testing.T, sa, method, path string, body io.Reader, contentType string) response {
	t.Helper()
	return w.send(t, w.request(t, sa, method, path, body, contentType))
}

func (w *world) request(t *testing.T, sa, method, path string, body io.Reader, contentType string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, w.sys.URL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if sa != "" {
		token, ok := w.tokens[sa]
		if !ok {
			t.Fatalf("no token for %s", sa)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	return req
}

func (w *world) send(t *testing.T, req *http.Request) response {
	t.Helper()
	resp, err := w.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatalf("read the answer to %s %s: %v", req.Method, req.URL.Path, err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// expectStatus fails unless r is a Status of code and reason.
func expectStatus(t *testing.T, what string, r response, code int, reason metav1.StatusReason) {
	t.Helper()
	s := r.status()
	if r.code != code || s.Code != int32(code) || s.Reason != reason {
		t.Errorf("%s: %d %s, want a Status %d %s", what, r.code, bytes.TrimSpace(r.body), code, reason)
	}
}

// rss is the resident memory of the ready process of service, in bytes.
func rss(t *testing.T, sys *harness.System, service string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sys.PID(t, service)))
	if err != nil {
		t.Fatalf("read %s's status: %v", service, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc status of %s", service)
	return 0
}
