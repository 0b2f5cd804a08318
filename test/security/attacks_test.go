package security

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The gateway's limits for the suite: small enough that a few dozen
// attackers reach them, and a request timeout short enough that the
// suite sees slots come back.
const (
	suiteMutatingInFlight = 20
	suiteRequestTimeout   = 6 * time.Second
	suiteWatchesPerUser   = 20
)

// TestTenantAttacks runs every attack a tenant of kplane was seen to get
// away with, and some more, against one system.
func TestTenantAttacks(t *testing.T) {
	w := setUp(t,
		"--max-mutating-requests-inflight="+strconv.Itoa(suiteMutatingInFlight),
		"--request-timeout="+suiteRequestTimeout.String(),
		"--max-long-running-requests-per-user="+strconv.Itoa(suiteWatchesPerUser),
	)
	t.Run("an apply that creates needs create", w.applyCreates)
	t.Run("cluster-scoped resources under a namespace are not found", w.pathConfusion)
	t.Run("watch smuggled in a query parameter", w.smuggledWatch)
	t.Run("amplifying JSON patch", w.amplifyingPatch)
	t.Run("huge bodies", w.hugeBodies)
	t.Run("trickled bodies", w.trickledBodies)
	t.Run("failing operator policy", w.failingPolicy)
	t.Run("forged identity headers", w.forgedHeaders)
	t.Run("straight to core", w.straightToCore)
	t.Run("malformed input", w.malformedInput)
	t.Run("slow headers", w.slowHeaders)
	t.Run("flood of watches", w.watchFlood)
	t.Run("memory stays bounded", func(t *testing.T) {
		for _, svc := range []string{"gateway", "core", "crd", "admission", "authn", "authz"} {
			if m := rss(t, w.sys, svc); m > 1<<30 {
				t.Errorf("%s holds %d MiB after the attacks", svc, m>>20)
			}
		}
	})
}

// applyCreates: a user who may patch and update but not create makes no
// object, whether by server-side apply or by a PUT to a kind that kube
// creates on update.
func (w *world) applyCreates(t *testing.T) {
	apply := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"sneaky","namespace":"tenant-a"},"data":{"a":"b"}}`
	r := w.do(t, patcher, http.MethodPatch, "/api/v1/namespaces/tenant-a/configmaps/sneaky?fieldManager=attacker",
		strings.NewReader(apply), "application/apply-patch+yaml")
	expectStatus(t, "an apply creating a configmap without create", r, http.StatusForbidden, metav1.StatusReasonForbidden)
	if r := w.admin(t, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps/sneaky", nil, ""); r.code != http.StatusNotFound {
		t.Errorf("the refused apply left a configmap behind: %d %s", r.code, r.body)
	}

	// A PUT creates only kinds kube creates on update (leases do,
	// configmaps do not), and then needs create as well.
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"sneaky","namespace":"tenant-a"},"spec":{"holderIdentity":"attacker"}}`
	r = w.do(t, patcher, http.MethodPut, "/apis/coordination.k8s.io/v1/namespaces/tenant-a/leases/sneaky", strings.NewReader(lease), "application/json")
	expectStatus(t, "a PUT creating a lease without create", r, http.StatusForbidden, metav1.StatusReasonForbidden)
	if r := w.admin(t, http.MethodGet, "/apis/coordination.k8s.io/v1/namespaces/tenant-a/leases/sneaky", nil, ""); r.code != http.StatusNotFound {
		t.Errorf("the refused PUT left a lease behind: %d %s", r.code, r.body)
	}
	r = w.do(t, patcher, http.MethodPut, "/api/v1/namespaces/tenant-a/configmaps/sneaky", strings.NewReader(apply), "application/json")
	expectStatus(t, "a PUT of a configmap that does not exist", r, http.StatusNotFound, metav1.StatusReasonNotFound)

	// Custom resources are served by crd, which asks authz the same.
	note := `{"apiVersion":"tenant.example.com/v1","kind":"Note","metadata":{"name":"sneaky","namespace":"tenant-a"},"text":"hi"}`
	r = w.do(t, patcher, http.MethodPatch, "/apis/tenant.example.com/v1/namespaces/tenant-a/notes/sneaky?fieldManager=attacker",
		strings.NewReader(note), "application/apply-patch+yaml")
	expectStatus(t, "an apply creating a note without create", r, http.StatusForbidden, metav1.StatusReasonForbidden)
	var st metav1.Status
	if err := json.Unmarshal(r.body, &st); err != nil {
		t.Errorf("refusal %s: %v", r.body, err)
	}
	if want := `notes.tenant.example.com "sneaky" is forbidden: User "system:serviceaccount:tenant-a:patcher" cannot create resource "notes" in API group "tenant.example.com" in the namespace "tenant-a"`; st.Message != want {
		t.Errorf("refusal %q, want kube's %q", st.Message, want)
	}
	if r := w.admin(t, http.MethodGet, "/apis/tenant.example.com/v1/namespaces/tenant-a/notes/sneaky", nil, ""); r.code != http.StatusNotFound {
		t.Errorf("the refused apply left a note behind: %d %s", r.code, r.body)
	}

	// Applying to an object that exists needs only patch.
	w.admin(t, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing"}}`), "application/json")
	exists := strings.ReplaceAll(apply, "sneaky", "existing")
	if r := w.do(t, patcher, http.MethodPatch, "/api/v1/namespaces/tenant-a/configmaps/existing?fieldManager=tenant",
		strings.NewReader(exists), "application/apply-patch+yaml"); r.code != http.StatusOK {
		t.Errorf("an apply to an existing configmap with patch rights: %d %s", r.code, r.body)
	}
	w.admin(t, http.MethodPost, "/apis/tenant.example.com/v1/namespaces/tenant-a/notes",
		strings.NewReader(`{"apiVersion":"tenant.example.com/v1","kind":"Note","metadata":{"name":"existing"}}`), "application/json")
	if r := w.do(t, patcher, http.MethodPatch, "/apis/tenant.example.com/v1/namespaces/tenant-a/notes/existing?fieldManager=tenant",
		strings.NewReader(strings.ReplaceAll(note, "sneaky", "existing")), "application/apply-patch+yaml"); r.code != http.StatusOK {
		t.Errorf("an apply to an existing note with patch rights: %d %s", r.code, r.body)
	}
}

// pathConfusion: a cluster-scoped resource asked for under a namespace
// is not found, whoever asks and whatever their role in that namespace
// grants; nothing is read or changed.
func (w *world) pathConfusion(t *testing.T) {
	for _, c := range []struct {
		sa, method, path, body string
	}{
		{viewer, http.MethodGet, "/api/v1/namespaces/tenant-a/namespaces", ""},
		{viewer, http.MethodGet, "/api/v1/namespaces/tenant-a/namespaces?watch=1", ""},
		{nsadmin, http.MethodGet, "/api/v1/namespaces/tenant-a/namespaces/tenant-b", ""},
		{nsadmin, http.MethodGet, "/api/v1/namespaces/tenant-a/namespaces/kube-system", ""},
		{nsadmin, http.MethodDelete, "/api/v1/namespaces/tenant-a/namespaces/tenant-b", ""},
		{nsadmin, http.MethodPut, "/api/v1/namespaces/tenant-a/namespaces/tenant-b",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"tenant-b","labels":{"owned":"yes"}}}`},
		{nsadmin, http.MethodPatch, "/api/v1/namespaces/tenant-a/namespaces/tenant-b", `{"metadata":{"labels":{"owned":"yes"}}}`},
		{nsadmin, http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/namespaces/tenant-a/clusterroles", ""},
		{nsadmin, http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/namespaces/tenant-a/clusterroles/cluster-admin", ""},
		{nsadmin, http.MethodGet, "/apis/rbac.authorization.k8s.io/v1/namespaces/tenant-a/clusterrolebindings", ""},
	} {
		var body io.Reader
		ct := ""
		if c.body != "" {
			body, ct = strings.NewReader(c.body), "application/json"
			if c.method == http.MethodPatch {
				ct = "application/merge-patch+json"
			}
		}
		r := w.doWithin(t, 10*time.Second, c.sa, c.method, c.path, body, ct)
		expectStatus(t, c.sa+" "+c.method+" "+c.path, r, http.StatusNotFound, metav1.StatusReasonNotFound)
	}
	r := w.admin(t, http.MethodGet, "/api/v1/namespaces/tenant-b", nil, "")
	if r.code != http.StatusOK || strings.Contains(string(r.body), `"owned"`) || strings.Contains(string(r.body), "deletionTimestamp") {
		t.Errorf("tenant-b after the attacks: %d %s", r.code, r.body)
	}
}

// smuggledWatch: every spelling of watch kube reads as true needs the
// watch verb; only "0" and "false" in any case are lists (kube's
// conversion of query values to bool).
func (w *world) smuggledWatch(t *testing.T) {
	for _, v := range []string{"yes", "1", "true", "True", "t", "on", "f", "no", ""} {
		r := w.doWithin(t, 10*time.Second, lister, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps?watch="+v, nil, "")
		expectStatus(t, "watch="+v+" by a user who may only list", r, http.StatusForbidden, metav1.StatusReasonForbidden)
	}
	r := w.doWithin(t, 10*time.Second, lister, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps?watch", nil, "")
	expectStatus(t, "a bare watch by a user who may only list", r, http.StatusForbidden, metav1.StatusReasonForbidden)
	for _, v := range []string{"false", "0", "False", "FALSE"} {
		if r := w.doWithin(t, 10*time.Second, lister, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps?watch="+v, nil, ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"ConfigMapList"`) {
			t.Errorf("watch=%s is a list: %d %s", v, r.code, r.body)
		}
	}
}

// amplifyingPatch: sixteen copy operations would double an object
// sixteen times; the patch is refused as kube refuses it and the object is
// unchanged.
func (w *world) amplifyingPatch(t *testing.T) {
	seed := strings.Repeat("x", 512)
	w.admin(t, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"amp"},"data":{"a":"`+seed+`"}}`), "application/json")
	before := rss(t, w.sys, "core")
	// Each copy of data into itself doubles it: 16 operations under 1 KB
	// would make 32 MiB.
	ops := make([]string, 0, 16)
	for i := range 16 {
		ops = append(ops, fmt.Sprintf(`{"op":"copy","from":"/data","path":"/data/b%d"}`, i))
	}
	patch := "[" + strings.Join(ops, ",") + "]"
	if len(patch) > 1<<10 {
		t.Fatalf("the attack is meant to be small; it is %d bytes", len(patch))
	}
	r := w.doWithin(t, 30*time.Second, writer, http.MethodPatch, "/api/v1/namespaces/tenant-a/configmaps/amp", strings.NewReader(patch), "application/json-patch+json")
	if s := r.status(); (r.code != http.StatusRequestEntityTooLarge && r.code != http.StatusUnprocessableEntity) || s.Code != int32(r.code) {
		t.Errorf("an amplifying JSON patch: %d %.300s, want 413 or 422 as kube", r.code, r.body)
	}
	got := w.admin(t, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps/amp", nil, "")
	if got.code != http.StatusOK || len(got.body) > 8<<10 {
		t.Errorf("the configmap after the refused patch: %d, %d bytes", got.code, len(got.body))
	}
	if grown := rss(t, w.sys, "core") - before; grown > 256<<20 {
		t.Errorf("core grew by %d MiB on one small patch", grown>>20)
	}
}

// zeros is an endless body.
type zeros struct{ left int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), z.left)
	clear(p[:n])
	z.left -= n
	return int(n), nil
}

// hugeBodies: a body far above the limit is refused without being held in
// memory, on a write and on a read, chunked or with a length.
func (w *world) hugeBodies(t *testing.T) {
	const huge = 200 << 20
	before := rss(t, w.sys, "gateway")
	for _, c := range []struct {
		name, method, path string
		chunked            bool
		want               int
	}{
		{"chunked create", http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps", true, http.StatusRequestEntityTooLarge},
		{"create with a length", http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps", false, http.StatusRequestEntityTooLarge},
		{"chunked patch", http.MethodPatch, "/api/v1/namespaces/tenant-a/configmaps/amp", true, http.StatusRequestEntityTooLarge},
		{"chunked get", http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps", true, 0},
		{"get with a length", http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps/amp", false, 0},
	} {
		req := w.request(t, writer, c.method, c.path, &zeros{left: huge}, "application/json")
		if c.method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
		if !c.chunked {
			req.ContentLength = huge
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := w.client.Do(req.WithContext(ctx))
		if err != nil {
			cancel()
			t.Errorf("%s with a 200 MiB body: %v", c.name, err)
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		cancel()
		r := response{code: resp.StatusCode, header: resp.Header, body: body}
		switch {
		case c.want != 0:
			expectStatus(t, c.name+" with a 200 MiB body", r, c.want, metav1.StatusReasonRequestEntityTooLarge)
		case r.code >= 500:
			t.Errorf("%s with a 200 MiB body: %d %.300s", c.name, r.code, r.body)
		}
	}
	if grown := rss(t, w.sys, "gateway") - before; grown > 64<<20 {
		t.Errorf("the gateway grew by %d MiB reading bodies it should refuse", grown>>20)
	}
}

// trickler sends a body of a declared length one byte at a time.
type trickler struct {
	ctx   context.Context
	every time.Duration
	left  int
}

func (r *trickler) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	select {
	case <-r.ctx.Done():
		return 0, r.ctx.Err()
	case <-time.After(r.every):
	}
	p[0] = ' '
	r.left--
	return 1, nil
}

// trickledBodies: clients that send their bodies a byte at a time cannot
// keep others from writing — anonymous ones are refused before their body
// is read, and authenticated ones lose their slot when the request times
// out.
func (w *world) trickledBodies(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	// The tricklers have connections of their own: the server closes
	// theirs once it gave up on their bodies.
	tricklers := &http.Client{Transport: w.client.Transport.(*http.Transport).Clone()}
	defer tricklers.CloseIdleConnections()
	start := func(n int, sa string, answers chan<- int) {
		for range n {
			wg.Go(func() {
				req := w.request(t, sa, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps", &trickler{ctx: ctx, every: 500 * time.Millisecond, left: 1000}, "application/json")
				req.ContentLength = 1000
				resp, err := tricklers.Do(req.WithContext(ctx))
				if err != nil {
					answers <- 0
					return
				}
				if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusTooManyRequests && !resp.Close {
					t.Errorf("a trickled create answered %d before its body was read, on a connection said to stay open", resp.StatusCode)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answers <- resp.StatusCode
			})
		}
	}

	// Anonymous writers are refused at once, body unread.
	const anonymous = 10 * suiteMutatingInFlight
	answers := make(chan int, anonymous)
	start(anonymous, "", answers)
	deadline := time.After(suiteRequestTimeout)
	for range anonymous {
		select {
		case code := <-answers:
			if code != http.StatusForbidden {
				t.Errorf("an anonymous trickled create: %d, want 403", code)
			}
		case <-deadline:
			t.Fatalf("anonymous trickled creates were not refused before their bodies arrived")
		}
	}

	// Writers who may create hold their slots only until the request
	// timeout; a create afterwards goes through.
	held := make(chan int, 2*suiteMutatingInFlight)
	start(2*suiteMutatingInFlight, writer, held)
	// The tricklers beyond the limit are turned away at once: then the
	// others hold every slot.
	for range suiteMutatingInFlight {
		select {
		case code := <-held:
			if code != http.StatusTooManyRequests {
				t.Fatalf("a trickled create beyond the limit: %d, want 429 while the others hold the slots", code)
			}
		case <-time.After(suiteRequestTimeout / 2):
			t.Fatalf("the tricklers beyond the limit were not turned away")
		}
	}
	if r := w.doWithin(t, suiteRequestTimeout, writer, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"during-trickle"}}`), "application/json"); r.code != http.StatusTooManyRequests {
		t.Fatalf("a create while tricklers hold every slot: %d %s, want 429", r.code, r.body)
	}
	ok := false
	for i := 0; i < 60 && !ok; i++ {
		r := w.doWithin(t, 3*suiteRequestTimeout, writer, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
			strings.NewReader(fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"after-trickle-%d"}}`, i)), "application/json")
		switch r.code {
		case http.StatusCreated:
			ok = true
		case http.StatusTooManyRequests:
			time.Sleep(500 * time.Millisecond)
		default:
			t.Fatalf("a create while tricklers hold the slots: %d %s", r.code, r.body)
		}
	}
	if !ok {
		t.Errorf("no create got through in 30 s while %d tricklers held the gateway's %d write slots", 2*suiteMutatingInFlight, suiteMutatingInFlight)
	}
}

// brokenPolicy fails at evaluation for one request only: two values for
// one complete rule.
const brokenPolicy = `package kplane.authz.broken

probe := "a" if {
	input.resourceAttributes.name == "rego-probe"
}

probe := "b" if {
	input.resourceAttributes.name == "rego-probe"
}

deny contains "never" if {
	probe == "c"
}
`

// failingPolicy: an operator policy that fails at evaluation denies.
func (w *world) failingPolicy(t *testing.T) {
	w.admin(t, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"rego-probe"}}`), "application/json")
	path := "/api/v1/namespaces/tenant-a/configmaps/rego-probe"
	if r := w.do(t, writer, http.MethodGet, path, nil, ""); r.code != http.StatusOK {
		t.Fatalf("the probe before the policy: %d %s", r.code, r.body)
	}
	file := filepath.Join(w.sys.DataDir, "policies", "broken.rego")
	if err := os.WriteFile(file, []byte(brokenPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	denied := w.eventually(t, 15*time.Second, func() bool {
		return w.do(t, writer, http.MethodGet, path, nil, "").code == http.StatusForbidden
	})
	if !denied {
		t.Errorf("a request on which an operator policy fails is still allowed")
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if !w.eventually(t, 15*time.Second, func() bool {
		return w.do(t, writer, http.MethodGet, path, nil, "").code == http.StatusOK
	}) {
		t.Errorf("the probe is still refused after the failing policy was removed")
	}
}

// forgedHeaders: identity a client writes into headers itself counts for
// nothing, on every kind of request.
func (w *world) forgedHeaders(t *testing.T) {
	forge := func(r *http.Request) {
		r.Header.Set("X-Remote-User", "kplane-admin")
		r.Header.Add("X-Remote-Group", "system:masters")
		r.Header.Set("X-Remote-Extra-Scopes", "all")
		r.Header.Set("X-Remote-Uid", "0")
	}
	cases := []struct {
		name, sa, path string
		upgrade        bool
		impersonate    bool
	}{
		{"anonymous list", "", "/api/v1/namespaces", false, false},
		{"anonymous discovery", "", "/apis", false, false},
		{"anonymous openapi", "", "/openapi/v3", false, false},
		{"tenant get in another namespace", viewer, "/api/v1/namespaces/tenant-b/configmaps/secret-plans", false, false},
		{"tenant watch in another namespace", viewer, "/api/v1/namespaces/tenant-b/configmaps?watch=1", false, false},
		{"tenant websocket watch", viewer, "/api/v1/namespaces/tenant-b/configmaps?watch=1", true, false},
		{"tenant impersonating the admin", viewer, "/api/v1/namespaces/tenant-b/configmaps", false, true},
		{"anonymous impersonating the admin", "", "/api/v1/namespaces", false, true},
	}
	for _, c := range cases {
		req := w.request(t, c.sa, http.MethodGet, c.path, nil, "")
		forge(req)
		if c.upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-Websocket-Version", "13")
			req.Header.Set("Sec-Websocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		}
		if c.impersonate {
			req.Header.Set("Impersonate-User", "kplane-admin")
			req.Header.Set("Impersonate-Group", "system:masters")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r := w.send(t, req.WithContext(ctx))
		cancel()
		expectStatus(t, c.name+" with forged identity headers", r, http.StatusForbidden, metav1.StatusReasonForbidden)
		if strings.Contains(r.status().Message, "kplane-admin") && !c.impersonate {
			t.Errorf("%s: the forged user shows in the answer: %s", c.name, r.body)
		}
	}
}

// straightToCore: core believes identity headers only from the gateway's
// certificate.
func (w *world) straightToCore(t *testing.T) {
	pool := x509.NewCertPool()
	caPEM, err := os.ReadFile(w.sys.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(caPEM)
	pki := filepath.Join(w.sys.DataDir, "pki")
	admin, err := tls.LoadX509KeyPair(filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"the admin's certificate", []tls.Certificate{admin}},
		{"a self-signed front-proxy-client certificate", []tls.Certificate{selfSigned(t, "front-proxy-client")}},
	} {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			RootCAs: pool, Certificates: c.certs, MinVersion: tls.VersionTLS12,
		}}}
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/api/v1/namespaces/tenant-b/configmaps", w.sys.Ports["core"]), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Remote-User", "kplane-admin")
		req.Header.Set("X-Remote-Group", "system:masters")
		resp, err := client.Do(req)
		if err != nil {
			// A certificate core cannot verify may fail the handshake: that
			// is a refusal too.
			var certErr *tls.CertificateVerificationError
			if c.certs != nil && (errors.As(err, &certErr) || strings.Contains(err.Error(), "certificate")) {
				continue
			}
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		expectStatus(t, "core with "+c.name, response{code: resp.StatusCode, body: body}, http.StatusUnauthorized, metav1.StatusReasonUnauthorized)
	}
}

func selfSigned(t *testing.T, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// admin sends a request with the admin's client certificate.
func (w *world) admin(t *testing.T, method, path string, body io.Reader, contentType string) response {
	t.Helper()
	pki := filepath.Join(w.sys.DataDir, "pki")
	cert, err := tls.LoadX509KeyPair(filepath.Join(pki, "admin.crt"), filepath.Join(pki, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	base := w.client.Transport.(*http.Transport)
	tr := base.Clone()
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert}
	defer tr.CloseIdleConnections()
	req := w.request(t, "", method, path, body, contentType)
	resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// doWithin is do bounded by d: an answer that does not come in time (a
// watch that should have been refused) is a response of code 0.
func (w *world) doWithin(t *testing.T, d time.Duration, sa, method, path string, body io.Reader, contentType string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req := w.request(t, sa, method, path, body, contentType).WithContext(ctx)
	resp, err := w.client.Do(req)
	if err != nil {
		return response{body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return response{code: 0, header: resp.Header, body: fmt.Appendf(b, " (cut off: %v)", err)}
	}
	return response{code: resp.StatusCode, header: resp.Header, body: b}
}

// eventually polls cond until it holds or d has passed.
func (w *world) eventually(t *testing.T, d time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}

// watchFlood: one user's watches beyond the per-user cap get kube's 429
// while everyone else keeps watching, and closing a watch frees its place.
func (w *world) watchFlood(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(sa string) (*http.Response, error) {
		req := w.request(t, sa, http.MethodGet, "/api/v1/namespaces/tenant-a/configmaps?watch=1", nil, "")
		return w.client.Do(req.WithContext(ctx))
	}
	var held []*http.Response
	defer func() {
		for _, r := range held {
			r.Body.Close()
		}
	}()
	for i := range suiteWatchesPerUser {
		resp, err := open(viewer)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("watch %d of %d allowed: %v %v", i+1, suiteWatchesPerUser, resp, err)
		}
		held = append(held, resp)
	}
	resp, err := open(viewer)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	r := response{code: resp.StatusCode, header: resp.Header, body: body}
	expectStatus(t, "a watch beyond the per-user cap", r, http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests)
	if s := r.status(); s.Details == nil || s.Details.RetryAfterSeconds < 1 || r.header.Get("Retry-After") == "" {
		t.Errorf("the 429 does not say when to retry: %s %v", body, r.header)
	}
	other, err := open(writer)
	if err != nil || other.StatusCode != http.StatusOK {
		t.Fatalf("another user's watch while one floods: %v %v", other, err)
	}
	other.Body.Close()
	held[0].Body.Close()
	held = held[1:]
	if !w.eventually(t, 10*time.Second, func() bool {
		resp, err := open(viewer)
		if err != nil {
			return false
		}
		if resp.StatusCode == http.StatusOK {
			held = append(held, resp)
			return true
		}
		resp.Body.Close()
		return false
	}) {
		t.Errorf("a closed watch did not free its place")
	}
}
