package e2e

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/test/e2e/harness"
)

// TestAuth drives authentication and authorization end to end with the
// stock kubectl: service account tokens from kubectl create token, whoami,
// can-i, RBAC grants, escalation, impersonation, anonymous access and an
// operator's Rego policy. Every expected line is kube-apiserver's.
func TestAuth(t *testing.T) {
	sys := harness.Start(t)
	const ns = "e2e-auth"
	createNamespace(t, sys, ns)
	mustKubectl(t, sys, "-n", ns, "create", "serviceaccount", "robot")
	token := strings.TrimSpace(mustKubectl(t, sys, "-n", ns, "create", "token", "robot"))
	robot := "system:serviceaccount:" + ns + ":robot"

	t.Run("anonymous", func(t *testing.T) { testAnonymous(t, sys) })
	t.Run("invalid token", func(t *testing.T) {
		// kubectl reads discovery first and reports its 401 in client-go's
		// words, as it does against kube-apiserver.
		_, errOut, err := sys.KubectlToken(t, "not-a-token", "get", "configmaps")
		if err == nil || lastLine(errOut) != "error: You must be logged in to the server (the server has asked for the client to provide credentials)" {
			t.Errorf("kubectl with an invalid token: %v\n%s", err, errOut)
		}
	})
	t.Run("whoami", func(t *testing.T) {
		out, errOut, err := sys.KubectlToken(t, token, "auth", "whoami", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl auth whoami: %v\n%s", err, errOut)
		}
		var review struct {
			Status struct {
				UserInfo struct {
					Username string              `json:"username"`
					UID      string              `json:"uid"`
					Groups   []string            `json:"groups"`
					Extra    map[string][]string `json:"extra"`
				} `json:"userInfo"`
			} `json:"status"`
		}
		if err := json.Unmarshal([]byte(out), &review); err != nil {
			t.Fatalf("decode whoami: %v\n%s", err, out)
		}
		u := review.Status.UserInfo
		wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
		if u.Username != robot || strings.Join(u.Groups, ",") != strings.Join(wantGroups, ",") || u.UID == "" {
			t.Errorf("whoami = %+v, want %s in %v with the service account's uid", u, robot, wantGroups)
		}
		if ids := u.Extra["authentication.kubernetes.io/credential-id"]; len(ids) != 1 || !strings.HasPrefix(ids[0], "JTI=") {
			t.Errorf("whoami extra = %v, want the token's credential id", u.Extra)
		}
		table, _, err := sys.KubectlToken(t, token, "auth", "whoami")
		if err != nil || !strings.HasPrefix(table, "ATTRIBUTE") || !strings.Contains(table, "Username") || !strings.Contains(table, robot) {
			t.Errorf("kubectl auth whoami table: %v\n%s", err, table)
		}
	})
	t.Run("forbidden until granted", func(t *testing.T) {
		_, errOut, err := sys.KubectlToken(t, token, "-n", ns, "get", "configmaps")
		want := `Error from server (Forbidden): configmaps is forbidden: User "` + robot + `" cannot list resource "configmaps" in API group "" in the namespace "` + ns + `"` + "\n"
		if err == nil || errOut != want {
			t.Errorf("kubectl get configmaps as %s: %v\n%s\nwant\n%s", robot, err, errOut, want)
		}
		out, _, err := sys.Kubectl(t, "-n", ns, "auth", "can-i", "list", "configmaps", "--as="+robot)
		if err == nil || out != "no\n" {
			t.Errorf("can-i before the grant: %v %q, want no", err, out)
		}
		mustKubectl(t, sys, "-n", ns, "create", "role", "cm-reader", "--verb=get,list,watch", "--resource=configmaps")
		mustKubectl(t, sys, "-n", ns, "create", "rolebinding", "robot-reads", "--role=cm-reader", "--serviceaccount="+ns+":robot")
		// The refusal above sits in the gateway's decision cache for 30 s;
		// the grant must flush it (authz's invalidation) well before.
		eventuallyKubectl(t, 5*time.Second, func() error {
			out, errOut, err := sys.KubectlToken(t, token, "-n", ns, "get", "configmaps", "-o", "name")
			if err != nil {
				return fmt.Errorf("kubectl get configmaps after the grant: %v\n%s", err, errOut)
			}
			if !strings.Contains(out, "configmap/kube-root-ca.crt") && out != "" {
				return fmt.Errorf("unexpected list %q", out)
			}
			return nil
		})
		out, errOut, err = sys.Kubectl(t, "-n", ns, "auth", "can-i", "list", "configmaps", "--as="+robot)
		if err != nil || out != "yes\n" {
			t.Errorf("can-i after the grant: %v %q %s, want yes", err, out, errOut)
		}
		out, errOut, err = sys.KubectlToken(t, token, "-n", ns, "auth", "can-i", "--list")
		if err != nil || !strings.Contains(out, "configmaps ") || !strings.Contains(out, "[get list watch]") ||
			!strings.Contains(out, "selfsubjectreviews.authentication.k8s.io") {
			t.Errorf("can-i --list as %s: %v\n%s%s", robot, err, out, errOut)
		}
	})
	t.Run("escalation refused", func(t *testing.T) {
		mustKubectl(t, sys, "-n", ns, "create", "role", "role-writer", "--verb=create,get", "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io")
		mustKubectl(t, sys, "-n", ns, "create", "rolebinding", "robot-writes-roles", "--role=role-writer", "--serviceaccount="+ns+":robot")
		eventuallyKubectl(t, 10*time.Second, func() error {
			_, errOut, err := sys.KubectlToken(t, token, "-n", ns, "create", "role", "sneaky", "--verb=get", "--resource=secrets")
			want := `Error from server (Forbidden): roles.rbac.authorization.k8s.io "sneaky" is forbidden: user "` + robot +
				`" (groups=["system:serviceaccounts" "system:serviceaccounts:` + ns + `" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:` +
				"\n" + `{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}` + "\n"
			if err == nil || errOut != want {
				return fmt.Errorf("create an escalating role: %v\n%s\nwant\n%s", err, errOut, want)
			}
			return nil
		})
		// What it holds, it may grant.
		if out, errOut, err := sys.KubectlToken(t, token, "-n", ns, "create", "role", "modest", "--verb=get", "--resource=configmaps"); err != nil {
			t.Errorf("create a role within its own rights: %v\n%s%s", err, out, errOut)
		}
	})
	t.Run("impersonation", func(t *testing.T) {
		_, errOut, err := sys.Kubectl(t, "-n", ns, "get", "configmaps", "--as=jane")
		want := `Error from server (Forbidden): configmaps is forbidden: User "jane" cannot list resource "configmaps" in API group "" in the namespace "` + ns + `"` + "\n"
		if err == nil || errOut != want {
			t.Errorf("admin as jane: %v\n%s\nwant\n%s", err, errOut, want)
		}
		_, errOut, err = sys.KubectlToken(t, token, "-n", ns, "get", "configmaps", "--as=jane")
		want = `Error from server (Forbidden): users "jane" is forbidden: User "` + robot + `" cannot impersonate resource "users" in API group "" at the cluster scope` + "\n"
		if err == nil || errOut != want {
			t.Errorf("robot as jane: %v\n%s\nwant\n%s", err, errOut, want)
		}
	})
	t.Run("issuer documents verify the token", func(t *testing.T) { testIssuer(t, sys, token) })
	t.Run("rego policy denies what rbac allows", func(t *testing.T) { testRegoDeny(t, sys, token, ns, robot) })
}

// testAnonymous checks that health and version are open to anyone and
// the API is not.
func testAnonymous(t *testing.T, sys *harness.System) {
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(sys.CAFile())
	if err != nil || !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("read the CA: %v", err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	get := func(path string) (int, string) {
		resp, err := client.Get(sys.URL() + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer func() { _ = resp.Body.Close() }()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, path := range []string{"/livez", "/readyz", "/healthz", "/version"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("anonymous GET %s = %d %s, want 200", path, code, body)
		}
	}
	code, body := get("/api")
	var status struct {
		Message string `json:"message"`
		Reason  string `json:"reason"`
	}
	_ = json.Unmarshal([]byte(body), &status)
	if code != http.StatusForbidden || status.Reason != "Forbidden" || status.Message != `forbidden: User "system:anonymous" cannot get path "/api"` {
		t.Errorf("anonymous GET /api = %d %s, want kube's 403", code, body)
	}
}

// testIssuer reads the service account issuer's discovery document and
// key set through the gateway, as a service account (kube's
// system:service-account-issuer-discovery binding), and checks the token's
// signature with nothing else: what an outside system does to trust
// kplane's tokens.
func testIssuer(t *testing.T, sys *harness.System, token string) {
	cs := clientset(t, sys.TokenConfig(token))
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/.well-known/openid-configuration").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("discovery document: %v", err)
	}
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(raw, &discovery); err != nil {
		t.Fatal(err)
	}
	if discovery.Issuer != "https://kubernetes.default.svc.cluster.local" || discovery.JWKSURI != discovery.Issuer+"/openid/v1/jwks" {
		t.Errorf("discovery document = %s", raw)
	}
	raw, err = cs.CoreV1().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("key set: %v", err)
	}
	var set struct {
		Keys []struct{ Kid, Kty, N, E string } `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token has %d parts", len(parts))
	}
	var header struct{ Alg, Kid string }
	var claims struct{ Iss string }
	decodeSegment(t, parts[0], &header)
	decodeSegment(t, parts[1], &claims)
	if header.Alg != "RS256" || claims.Iss != discovery.Issuer {
		t.Fatalf("token header %+v, issuer %q", header, claims.Iss)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	for _, k := range set.Keys {
		if k.Kid != header.Kid || k.Kty != "RSA" {
			continue
		}
		n, errN := base64.RawURLEncoding.DecodeString(k.N)
		e, errE := base64.RawURLEncoding.DecodeString(k.E)
		if errN != nil || errE != nil {
			t.Fatalf("key %s: %v %v", k.Kid, errN, errE)
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
			t.Fatalf("the token does not verify with key %s: %v", k.Kid, err)
		}
		return
	}
	t.Fatalf("no key %q in the key set %s", header.Kid, raw)
}

func decodeSegment(t *testing.T, segment string, into any) {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(segment)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatal(err)
	}
}

// testRegoDeny installs the example policy that protects namespaces
// labelled protected=true and shows it refusing a delete that RBAC
// (cluster-admin) allows.
func testRegoDeny(t *testing.T, sys *harness.System, token, ns, robot string) {
	policy, err := os.ReadFile(filepath.Join("..", "..", "services", "authz", "policies", "protect-namespaces.rego"))
	if err != nil {
		t.Fatalf("read the example policy: %v", err)
	}
	if err := os.WriteFile(filepath.Join(sys.DataDir, "policies", "protect-namespaces.rego"), policy, 0o600); err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, sys, "create", "clusterrolebinding", "robot-admin", "--clusterrole=cluster-admin", "--serviceaccount="+ns+":robot")
	mustKubectl(t, sys, "create", "namespace", "guarded")
	mustKubectl(t, sys, "label", "namespace", "guarded", "protected=true")
	mustKubectl(t, sys, "create", "namespace", "unguarded")
	// Ask first: a delete tried before authz loaded the policy would
	// succeed.
	eventuallyKubectl(t, 10*time.Second, func() error {
		// kubectl adds the policy's reason to its answer.
		out, errOut, _ := sys.KubectlToken(t, token, "auth", "can-i", "delete", "namespace/guarded")
		if out != "no - namespace \"guarded\" is protected\n" {
			return fmt.Errorf("can-i delete namespace/guarded = %q %s, want no once the policy is loaded", out, errOut)
		}
		return nil
	})
	if out, _, _ := sys.KubectlToken(t, token, "auth", "can-i", "delete", "namespace/unguarded"); out != "yes\n" {
		t.Errorf("can-i delete namespace/unguarded = %q, want yes", out)
	}
	eventuallyKubectl(t, 10*time.Second, func() error {
		_, errOut, err := sys.KubectlToken(t, token, "delete", "namespace", "guarded")
		if err == nil {
			return fmt.Errorf("the protected namespace was deleted")
		}
		if !strings.HasPrefix(errOut, `Error from server (Forbidden): namespaces "guarded" is forbidden: User "`+robot+`" cannot delete resource "namespaces"`) ||
			!strings.Contains(errOut, `namespace "guarded" is protected`) {
			return fmt.Errorf("delete a protected namespace: %s", errOut)
		}
		return nil
	})
	if _, errOut, err := sys.KubectlToken(t, token, "delete", "namespace", "unguarded", "--wait=false"); err != nil {
		t.Errorf("delete an unprotected namespace as cluster-admin: %v\n%s", err, errOut)
	}
}

func mustKubectl(t *testing.T, sys *harness.System, args ...string) string {
	t.Helper()
	out, errOut, err := sys.Kubectl(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// eventuallyKubectl retries check for up to timeout while what it depends
// on propagates (an informer in authz, a policy reload, the flush of the
// gateway's decision cache).
func eventuallyKubectl(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	if err := eventually(context.Background(), timeout, func(context.Context) error { return check() }); err != nil {
		t.Error(err)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestOIDC runs authn against a small OpenID provider started by the test
// and shows kubectl calling with a token that provider signed.
func TestOIDC(t *testing.T) {
	issuer := newOIDCIssuer(t)
	sys := harness.Start(t, harness.WithArgs("authn",
		"--oidc-issuer-url="+issuer.url,
		"--oidc-client-id=kplane",
		"--oidc-ca-file="+issuer.caFile,
		"--oidc-username-claim=email",
		"--oidc-groups-claim=groups",
		"--oidc-groups-prefix=oidc:",
	))
	token := issuer.sign(t, map[string]any{
		"iss": issuer.url, "aud": "kplane", "sub": "u-1", "email": "alice@example.com", "email_verified": true,
		"groups": []string{"dev"}, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(),
	})
	out, errOut, err := sys.KubectlToken(t, token, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}")
	if want := `alice@example.com ["oidc:dev","system:authenticated"]`; err != nil || out != want {
		t.Errorf("whoami with an OIDC token = %q, %v %s; want %q", out, err, errOut, want)
	}
	expired := issuer.sign(t, map[string]any{
		"iss": issuer.url, "aud": "kplane", "sub": "u-1", "email": "alice@example.com", "email_verified": true,
		"iat": time.Now().Add(-2 * time.Hour).Unix(), "exp": time.Now().Add(-time.Hour).Unix(),
	})
	// whoami reads no discovery: kubectl prints the 401's own message.
	if _, errOut, err := sys.KubectlToken(t, expired, "auth", "whoami"); err == nil || lastLine(errOut) != "error: You must be logged in to the server (Unauthorized)" {
		t.Errorf("whoami with an expired OIDC token: %v\n%s", err, errOut)
	}
}

// TestAuthzReplicaKilledUnderLoad runs three authz replicas and SIGKILLs
// one while clients that are not system:masters (so every request is
// authorized by authz) send requests the gateway's decision cache has not
// seen: none fails.
func TestAuthzReplicaKilledUnderLoad(t *testing.T) {
	sys := harness.Start(t, harness.WithReplicas("authz", 3))
	const ns = "e2e-authz-load"
	createNamespace(t, sys, ns)
	mustKubectl(t, sys, "-n", ns, "create", "serviceaccount", "reader")
	mustKubectl(t, sys, "-n", ns, "create", "role", "cm-reader", "--verb=get", "--resource=configmaps")
	mustKubectl(t, sys, "-n", ns, "create", "rolebinding", "reader", "--role=cm-reader", "--serviceaccount="+ns+":reader")
	token := strings.TrimSpace(mustKubectl(t, sys, "-n", ns, "create", "token", "reader"))
	cs := clientset(t, sys.TokenConfig(token))
	ctx := context.Background()
	// The grant has reached every replica when each of a few fresh names
	// is authorized.
	if err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		for i := range 6 {
			if _, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("warm-%d", i), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("get as the reader: %v, want NotFound", err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	const workers, perWorker = 4, 100
	var sent atomic.Int64
	var failures errorLog
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				// A name per request: a decision the cache has not seen.
				_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, fmt.Sprintf("cm-%d-%d", w, i), metav1.GetOptions{})
				if !apierrors.IsNotFound(err) {
					failures.add(err)
				}
				sent.Add(1)
			}
		}()
	}
	if err := eventually(ctx, time.Minute, func(context.Context) error {
		if n := sent.Load(); n < workers*perWorker/4 {
			return fmt.Errorf("%d requests sent", n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sys.KillService(t, "authz-1")
	wg.Wait()
	failures.report(t, "requests")
	t.Logf("%d requests, authz-1 killed after a quarter", sent.Load())
}

// oidcIssuer is a minimal OpenID provider: discovery, a JWKS with one RSA
// key, and RS256 tokens.
type oidcIssuer struct {
	url, caFile string
	key         *rsa.PrivateKey
}

func newOIDCIssuer(t *testing.T) *oidcIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &oidcIssuer{key: key}
	mux := http.NewServeMux()
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.url, "jwks_uri": iss.url + "/jwks", "id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "alg": "RS256", "use": "sig", "kid": "k1",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	iss.caFile = filepath.Join(t.TempDir(), "oidc-ca.crt")
	if err := os.WriteFile(iss.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return iss
}

// sign returns claims as a compact RS256 JWS.
func (iss *oidcIssuer) sign(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"}) + "." + enc(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, iss.key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}
