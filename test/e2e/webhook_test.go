package e2e

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kplane.dev/libs/pki"
	"kplane.dev/test/e2e/harness"
)

// admissionWebhook is a real HTTPS admission webhook whose answer each
// path decides: the tests point configurations at its paths.
type admissionWebhook struct {
	*httptest.Server
	caBundle []byte

	mu sync.Mutex
	// calls counts the reviews each path answered; dryRuns those that
	// were dry runs.
	calls, dryRuns map[string]int
	// last is the last request each path received, and traceparent its
	// W3C trace context header.
	last        map[string]webhookRequest
	traceparent map[string]string
}

// webhookRequest is what the tests read of an AdmissionReview's request.
type webhookRequest struct {
	UID         string            `json:"uid"`
	DryRun      bool              `json:"dryRun"`
	Kind        map[string]string `json:"kind"`
	RequestKind map[string]string `json:"requestKind"`
	Object      map[string]any    `json:"object"`
}

func newAdmissionWebhook(t testing.TB) *admissionWebhook {
	t.Helper()
	ca, err := pki.NewCA("e2e-admission-webhook-ca", time.Now())
	if err != nil {
		t.Fatalf("make the webhook CA: %v", err)
	}
	cert, err := ca.Serving("e2e-admission-webhook", []string{webhookHost}, time.Now())
	if err != nil {
		t.Fatalf("issue the webhook certificate: %v", err)
	}
	w := &admissionWebhook{caBundle: ca.CertPEM(), calls: map[string]int{}, dryRuns: map[string]int{}, last: map[string]webhookRequest{}, traceparent: map[string]string{}}
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLSCertificate()}}
	w.StartTLS()
	t.Cleanup(w.Close)
	return w
}

func (w *admissionWebhook) callsOf(path string) (calls, dryRuns int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.calls[path], w.dryRuns[path]
}

// lastOf is the last request path received, and whether it received one.
func (w *admissionWebhook) lastOf(path string) (webhookRequest, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.last[path]
	return r, ok
}

// traceparentOf is the traceparent header of the last request path
// received.
func (w *admissionWebhook) traceparentOf(path string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.traceparent[path]
}

func (w *admissionWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review struct {
		APIVersion string         `json:"apiVersion"`
		Request    webhookRequest `json:"request"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(rw, fmt.Sprintf("read the AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	w.mu.Lock()
	w.calls[r.URL.Path]++
	w.last[r.URL.Path] = review.Request
	w.traceparent[r.URL.Path] = r.Header.Get("traceparent")
	if review.Request.DryRun {
		w.dryRuns[r.URL.Path]++
	}
	w.mu.Unlock()
	response := map[string]any{"uid": review.Request.UID, "allowed": true}
	p := r.URL.Path
	if strings.HasSuffix(p, "-slowly") {
		// Long enough for reviews to be under way on a replica killed.
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
		}
	}
	if p == "/deny-audited" {
		response["auditAnnotations"] = map[string]string{"verdict": "refused"}
	}
	switch {
	case strings.HasPrefix(p, "/deny"):
		response["allowed"] = false
		response["status"] = map[string]any{"message": "no writes here"}
	case p == "/set-b":
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/labels/b", "value": "yes"}})
		response["patchType"] = "JSONPatch"
		response["patch"] = base64.StdEncoding.EncodeToString(patch)
	case p == "/copy-b":
		// Records what label b held when it was called: reinvoked after
		// set-b, it sees yes.
		seen := "none"
		if md, ok := review.Request.Object["metadata"].(map[string]any); ok {
			if labels, ok := md["labels"].(map[string]any); ok {
				if b, ok := labels["b"].(string); ok {
					seen = b
				}
			}
		}
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/labels/seen-b", "value": seen}})
		response["patchType"] = "JSONPatch"
		response["patch"] = base64.StdEncoding.EncodeToString(patch)
	case p == "/label":
		patch, _ := json.Marshal([]map[string]any{{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}})
		response["patchType"] = "JSONPatch"
		response["patch"] = base64.StdEncoding.EncodeToString(patch)
	case strings.HasPrefix(p, "/warn"):
		response["warnings"] = []string{"careful: this write is watched"}
	case strings.HasPrefix(p, "/slow"):
		select {
		case <-time.After(5 * time.Second):
		case <-r.Context().Done():
		}
	}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(map[string]any{
		"apiVersion": review.APIVersion,
		"kind":       "AdmissionReview",
		"response":   response,
	})
}

// webhookConfiguration is a configuration of one webhook named
// <name>.kplane.test that sees creates of configmaps labelled
// kplane.test/case=<name>, with extra YAML lines added to the webhook.
func (w *admissionWebhook) configuration(kind, name, path, extra string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: %s
metadata:
  name: %s
webhooks:
- name: %s.kplane.test
  clientConfig:
    url: %s%s
    caBundle: %s
  rules:
  - operations: ["CREATE"]
    apiGroups: [""]
    apiVersions: ["v1"]
    resources: ["configmaps"]
  objectSelector:
    matchLabels:
      kplane.test/case: %s
  admissionReviewVersions: ["v1"]
  sideEffects: None
%s`, kind, name, name, w.URL, path, base64.StdEncoding.EncodeToString(w.caBundle), name, extra)
}

// applyManifest applies a manifest with kubectl.
func applyManifest(t *testing.T, sys *harness.System, manifest string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, sys, "apply", "-f", file)
}

// labelledConfigMap creates a configmap labelled for case c with kubectl
// and returns kubectl's error output.
func labelledConfigMap(t *testing.T, sys *harness.System, c, name string, extra ...string) (string, error) {
	t.Helper()
	manifest := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  labels:\n    kplane.test/case: %s\ndata:\n  a: b\n", name, c)
	file := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := sys.Kubectl(t, append([]string{"create", "-f", file}, extra...)...)
	return errOut, err
}

// TestWebhooks drives the admission webhooks a user configures with the
// stock kubectl, through two admission replicas, and checks kube's exact
// lines.
func TestWebhooks(t *testing.T) {
	sys := harness.Start(t, harness.WithReplicas("admission", 2))
	hook := newAdmissionWebhook(t)

	// denied waits for configuration to take effect: the first write
	// refused, then every one of ten, so that both replicas follow it.
	denied := func(t *testing.T, c, want string) {
		t.Helper()
		n := 0
		eventuallyKubectl(t, 10*time.Second, func() error {
			n++
			errOut, err := labelledConfigMap(t, sys, c, fmt.Sprintf("%s-%d", c, n))
			if err == nil || !strings.Contains(errOut, want) {
				return fmt.Errorf("create of a configmap labelled for %s: %v %q, want refused with %q", c, err, errOut, want)
			}
			return nil
		})
		for i := range 10 {
			errOut, err := labelledConfigMap(t, sys, c, fmt.Sprintf("%s-again-%d", c, i))
			if err == nil || !strings.Contains(errOut, want) {
				t.Fatalf("create %d after the first refusal: %v %q, want refused with %q", i, err, errOut, want)
			}
		}
	}

	t.Run("validating webhook denies", func(t *testing.T) {
		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "deny", "/deny", ""))
		denied(t, "deny", `Error from server: error when creating "`)
		errOut, _ := labelledConfigMap(t, sys, "deny", "deny-line")
		if want := `admission webhook "deny.kplane.test" denied the request: no writes here`; !strings.HasSuffix(strings.TrimSpace(errOut), want) {
			t.Errorf("kubectl printed %q, want a line ending in %q", errOut, want)
		}
		if errOut, err := labelledConfigMap(t, sys, "other", "not-selected"); err != nil {
			t.Errorf("a configmap the objectSelector does not match was refused: %v\n%s", err, errOut)
		}
	})

	t.Run("mutating webhook patches", func(t *testing.T) {
		applyManifest(t, sys, hook.configuration("MutatingWebhookConfiguration", "label", "/label", ""))
		eventuallyKubectl(t, 10*time.Second, func() error {
			name := fmt.Sprintf("label-%d", time.Now().UnixNano())
			if errOut, err := labelledConfigMap(t, sys, "label", name); err != nil {
				return fmt.Errorf("create: %v\n%s", err, errOut)
			}
			if got := mustKubectl(t, sys, "get", "configmap", name, "-o", "jsonpath={.metadata.labels.mutated}"); got != "yes" {
				return fmt.Errorf("label mutated is %q, want the webhook's yes", got)
			}
			return nil
		})
	})

	t.Run("reinvocation", func(t *testing.T) {
		// a-copy runs first (configurations go by name), before set-b
		// adds label b; with IfNeeded it runs again and sees it.
		copyB := strings.Replace(hook.configuration("MutatingWebhookConfiguration", "a-copy", "/copy-b", "  reinvocationPolicy: IfNeeded\n"), "kplane.test/case: a-copy", "kplane.test/case: reinvoke", 1)
		setB := strings.Replace(hook.configuration("MutatingWebhookConfiguration", "b-set", "/set-b", ""), "kplane.test/case: b-set", "kplane.test/case: reinvoke", 1)
		applyManifest(t, sys, copyB+"---\n"+setB)
		eventuallyKubectl(t, 10*time.Second, func() error {
			name := fmt.Sprintf("reinvoke-%d", time.Now().UnixNano())
			if errOut, err := labelledConfigMap(t, sys, "reinvoke", name); err != nil {
				return fmt.Errorf("create: %v\n%s", err, errOut)
			}
			if got := mustKubectl(t, sys, "get", "configmap", name, "-o", "jsonpath={.metadata.labels.b} {.metadata.labels.seen-b}"); got != "yes yes" {
				return fmt.Errorf("labels b and seen-b are %q, want \"yes yes\": a-copy reinvoked after b-set", got)
			}
			return nil
		})
	})

	t.Run("warnings", func(t *testing.T) {
		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "warn", "/warn", ""))
		eventuallyKubectl(t, 10*time.Second, func() error {
			errOut, err := labelledConfigMap(t, sys, "warn", fmt.Sprintf("warn-%d", time.Now().UnixNano()))
			if err != nil {
				return fmt.Errorf("create: %v\n%s", err, errOut)
			}
			if want := "Warning: careful: this write is watched"; !strings.Contains(errOut, want) {
				return fmt.Errorf("kubectl printed %q, want %q", errOut, want)
			}
			return nil
		})
	})

	t.Run("matchConditions", func(t *testing.T) {
		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "conditions", "/deny", `  matchConditions:
  - name: bad-names
    expression: '!object.metadata.name.startsWith("good")'
`))
		denied(t, "conditions", `admission webhook "conditions.kplane.test" denied the request`)
		if errOut, err := labelledConfigMap(t, sys, "conditions", "good-name"); err != nil {
			t.Errorf("a configmap the matchCondition is false for was refused: %v\n%s", err, errOut)
		}
	})

	t.Run("namespaceSelector", func(t *testing.T) {
		mustKubectl(t, sys, "create", "namespace", "guarded")
		mustKubectl(t, sys, "label", "namespace", "guarded", "kplane.test/guarded=yes")
		mustKubectl(t, sys, "create", "namespace", "open")
		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "namespaces", "/deny", `  namespaceSelector:
    matchLabels:
      kplane.test/guarded: "yes"
`))
		eventuallyKubectl(t, 10*time.Second, func() error {
			errOut, err := labelledConfigMap(t, sys, "namespaces", fmt.Sprintf("ns-%d", time.Now().UnixNano()), "-n", "guarded")
			if err == nil || !strings.Contains(errOut, `admission webhook "namespaces.kplane.test" denied the request`) {
				return fmt.Errorf("create in the guarded namespace: %v %q, want refused", err, errOut)
			}
			return nil
		})
		if errOut, err := labelledConfigMap(t, sys, "namespaces", "open-cm", "-n", "open"); err != nil {
			t.Errorf("create in a namespace the selector does not match was refused: %v\n%s", err, errOut)
		}
	})

	t.Run("failurePolicy", func(t *testing.T) {
		unreachable := strings.Replace(hook.configuration("ValidatingWebhookConfiguration", "unreachable", "/deny", "  failurePolicy: Fail\n"), hook.URL, "https://127.0.0.1:1", 1)
		applyManifest(t, sys, unreachable)
		denied(t, "unreachable", `Error from server (InternalError): error when creating "`)
		errOut, _ := labelledConfigMap(t, sys, "unreachable", "unreachable-line")
		if want := `Internal error occurred: failed calling webhook "unreachable.kplane.test": failed to call webhook: Post "https://127.0.0.1:1/deny?timeout=10s": dial tcp 127.0.0.1:1: connect: connection refused`; !strings.HasSuffix(strings.TrimSpace(errOut), want) {
			t.Errorf("kubectl printed %q, want a line ending in %q", errOut, want)
		}

		slow := hook.configuration("ValidatingWebhookConfiguration", "slow", "/slow", "  failurePolicy: Fail\n  timeoutSeconds: 1\n")
		applyManifest(t, sys, slow)
		denied(t, "slow", `failed calling webhook "slow.kplane.test": failed to call webhook: Post "`+hook.URL+`/slow?timeout=1s": context deadline exceeded`)

		applyManifest(t, sys, hook.configuration("ValidatingWebhookConfiguration", "ignored", "/slow-ignored", "  failurePolicy: Ignore\n  timeoutSeconds: 1\n"))
		// Ignore lets the write through whether or not the configuration
		// has reached the replica, so wait for the webhook to be asked.
		eventuallyKubectl(t, 10*time.Second, func() error {
			if errOut, err := labelledConfigMap(t, sys, "ignored", fmt.Sprintf("ignored-%d", time.Now().UnixNano())); err != nil {
				return fmt.Errorf("a write past a slow webhook with failurePolicy Ignore was refused: %v\n%s", err, errOut)
			}
			if calls, _ := hook.callsOf("/slow-ignored"); calls == 0 {
				return fmt.Errorf("the slow webhook was not asked yet")
			}
			return nil
		})
	})

	t.Run("dry run", func(t *testing.T) {
		// admissionregistration.k8s.io/v1 knows no webhook with side
		// effects on dry runs: kube refuses the configuration, so that
		// its refusal of such a dry run cannot arise.
		file := filepath.Join(t.TempDir(), "effects.yaml")
		if err := os.WriteFile(file, []byte(strings.Replace(hook.configuration("ValidatingWebhookConfiguration", "effects", "/deny-effects", ""), "sideEffects: None", "sideEffects: Some", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, errOut, err := sys.Kubectl(t, "apply", "-f", file)
		if want := `The ValidatingWebhookConfiguration "effects" is invalid: webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"`; err == nil || !strings.Contains(errOut, want) {
			t.Errorf("apply a v1 webhook with sideEffects Some: %v %q, want %q", err, errOut, want)
		}

		for _, effects := range []string{"None", "NoneOnDryRun"} {
			path := "/warn-" + effects
			name := "pure-" + strings.ToLower(effects)
			applyManifest(t, sys, strings.Replace(hook.configuration("ValidatingWebhookConfiguration", name, path, ""), "sideEffects: None", "sideEffects: "+effects, 1))
			eventuallyKubectl(t, 10*time.Second, func() error {
				if errOut, err := labelledConfigMap(t, sys, name, name+"-dry", "--dry-run=server"); err != nil {
					return fmt.Errorf("a server dry run past a webhook with sideEffects %s: %v\n%s", effects, err, errOut)
				}
				if _, dry := hook.callsOf(path); dry == 0 {
					return fmt.Errorf("the webhook with sideEffects %s was not asked with dryRun", effects)
				}
				return nil
			})
			if _, errOut, err := sys.Kubectl(t, "get", "configmap", name+"-dry"); err == nil {
				t.Errorf("a dry-run configmap was stored\n%s", errOut)
			}
		}
	})
}
