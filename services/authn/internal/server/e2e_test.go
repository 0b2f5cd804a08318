package server

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	authenticationv1 "k8s.io/api/authentication/v1"

	"kplane.dev/libs/natsrpc"
	authnproto "kplane.dev/proto/authn"
	"kplane.dev/services/authn/internal/authenticator/oidc"
	"kplane.dev/services/authn/internal/authenticator/oidc/oidctest"
)

func TestIssuerDocuments(t *testing.T) {
	e := newEnv(t, false)
	start(t, e.options(), nil)
	ctx := context.Background()

	var disc map[string]any
	raw, err := natsrpc.Request(ctx, e.nc, authnproto.SubjectIssuerDiscovery, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &disc); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"issuer":                                DefaultIssuer,
		"jwks_uri":                              DefaultIssuer + "/openid/v1/jwks",
		"response_types_supported":              []any{"id_token"},
		"subject_types_supported":               []any{"public"},
		"id_token_signing_alg_values_supported": []any{"RS256"},
	}
	if fmt.Sprint(disc) != fmt.Sprint(want) {
		t.Errorf("discovery %v, want %v", disc, want)
	}

	// An outside verifier checks a token with nothing but the key set.
	raw, err = natsrpc.Request(ctx, e.nc, authnproto.SubjectIssuerKeys, nil)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []struct{ Kty, Kid, Use, Alg, N, E string } `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("key set %s: %v", raw, err)
	}
	k := set.Keys[0]
	n, _ := base64.RawURLEncoding.DecodeString(k.N)
	ex, _ := base64.RawURLEncoding.DecodeString(k.E)
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(ex).Int64())}
	tr, err := requestToken(e.nc, "team", "robot", "uid-1", &authenticationv1.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Parse(tr.Status.Token, func(tok *jwt.Token) (any, error) {
		if tok.Header["kid"] != k.Kid {
			return nil, fmt.Errorf("kid %v not in the key set", tok.Header["kid"])
		}
		return pub, nil
	}, jwt.WithIssuer(DefaultIssuer), jwt.WithAudience(DefaultIssuer), jwt.WithValidMethods([]string{"RS256"}))
	if err != nil || !tok.Valid {
		t.Fatalf("token does not verify with the published key: %v", err)
	}
	if sub, _ := tok.Claims.GetSubject(); sub != "system:serviceaccount:team:robot" {
		t.Errorf("sub %q", sub)
	}
}

// TestReplicas runs three replicas in one queue group and stops one while
// reviews are under way: none may fail.
func TestReplicas(t *testing.T) {
	e := newEnv(t, false)
	var replicas []*replica
	for range 3 {
		replicas = append(replicas, start(t, e.options(), nil))
	}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				got, err := reviewErr(e.nc, staticToken)
				if err != nil || !got.Status.Authenticated {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprint(err, got))
					continue
				}
				ok.Add(1)
			}
		}()
	}
	waitFor := func(n int64) {
		deadline := time.Now().Add(10 * time.Second)
		for ok.Load() < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitFor(200)
	replicas[1].stop()
	before := ok.Load()
	waitFor(before + 500)
	cancel()
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d of %d reviews failed, first: %v", failed.Load(), failed.Load()+ok.Load(), firstErr.Load())
	}
	if ok.Load() < before+500 {
		t.Fatalf("only %d reviews after a replica stopped", ok.Load()-before)
	}
}

func TestHTTPWebhook(t *testing.T) {
	e := newEnv(t, false)
	r := start(t, e.options(), nil)
	url := "https://" + r.Addr().String()
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{"token":"` + staticToken + `"}}`
	client := func(cert bool) *http.Client {
		cfg := &tls.Config{RootCAs: e.caPool}
		if cert {
			cfg.Certificates = []tls.Certificate{e.client}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	}
	post := func(c *http.Client, body string) (int, []byte) {
		resp, err := c.Post(url+tokenReviewPath, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	t.Run("with a client certificate", func(t *testing.T) {
		code, b := post(client(true), body)
		var got authenticationv1.TokenReview
		if code != http.StatusOK || json.Unmarshal(b, &got) != nil || !got.Status.Authenticated || got.Status.User.Username != "alice" {
			t.Fatalf("got %d %s", code, b)
		}
		if got.APIVersion != "authentication.k8s.io/v1" || got.Kind != "TokenReview" {
			t.Errorf("type %s %s", got.APIVersion, got.Kind)
		}
	})
	t.Run("v1beta1 answered in kind", func(t *testing.T) {
		code, b := post(client(true), strings.Replace(body, "/v1", "/v1beta1", 1))
		if code != http.StatusOK || !bytes.Contains(b, []byte(`"apiVersion":"authentication.k8s.io/v1beta1"`)) {
			t.Fatalf("got %d %s", code, b)
		}
	})
	t.Run("without a client certificate", func(t *testing.T) {
		code, b := post(client(false), body)
		if code != http.StatusUnauthorized || !bytes.Contains(b, []byte(`"kind":"Status"`)) {
			t.Fatalf("got %d %s, want 401 Status", code, b)
		}
	})
	t.Run("health is open", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/livez", "/readyz?verbose"} {
			resp, err := client(false).Get(url + path)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: %d %s", path, resp.StatusCode, b)
			}
			if path == "/readyz?verbose" && !bytes.Contains(b, []byte("[+]nats ok")) {
				t.Errorf("readyz without the nats check:\n%s", b)
			}
		}
	})
	t.Run("metrics need a client certificate", func(t *testing.T) {
		resp, err := client(false).Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("/metrics without a client certificate: %d, want 401", resp.StatusCode)
		}
		resp, err = client(true).Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
		}
		for _, want := range []string{
			`kplane_authn_reviews_total{result="authenticated"}`,
			`authentication_attempts{result="success"}`,
			`authentication_duration_seconds_bucket{result="success"`,
			`authentication_token_cache_request_total{status="miss"}`,
			`authentication_token_cache_fetch_total{status="ok"}`,
		} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("metrics without %s:\n%s", want, b)
			}
		}
	})
}

func TestOIDC(t *testing.T) {
	e := newEnv(t, false)
	p := oidctest.Start(t)
	o := e.options()
	o.OIDC.IssuerURL, o.OIDC.ClientID = p.URL, "kplane"
	o.OIDC.CAFile = e.write(t, "oidc-ca.crt", p.CAPEM)
	o.OIDC.GroupsClaim, o.OIDC.GroupsPrefix = "groups", "oidc:"
	o.OIDC.RequiredClaims = []string{"tenant=acme"}
	start(t, o, func(c *Config) {
		// The production refresh interval is seconds; the test rotates
		// now.
		var err error
		c.oidc, err = oidc.New(oidc.Options{IssuerURL: p.URL, ClientID: "kplane", CA: p.CA, GroupsClaim: "groups",
			GroupsPrefix: "oidc:", RequiredClaims: map[string]string{"tenant": "acme"}}, oidc.WithRefreshInterval(0))
		if err != nil {
			t.Fatal(err)
		}
	})
	claims := jwt.MapClaims{"sub": "bob", "aud": "kplane", "exp": time.Now().Add(time.Hour).Unix(), "groups": []string{"admins"}, "tenant": "acme"}

	got := review(t, e.nc, p.Sign(t, claims))
	wantUser := authenticationv1.UserInfo{Username: p.URL + "#bob", Groups: []string{"oidc:admins", "system:authenticated"}}
	if !got.Status.Authenticated || fmt.Sprint(got.Status.User) != fmt.Sprint(wantUser) {
		t.Fatalf("status %+v, want %+v", got.Status, wantUser)
	}
	p.Rotate(t, true)
	if got := review(t, e.nc, p.Sign(t, claims)); !got.Status.Authenticated {
		t.Fatalf("token of the rotated key refused: %q", got.Status.Error)
	}
	claims["tenant"] = "other"
	if got := review(t, e.nc, p.Sign(t, claims)); got.Status.Authenticated || !strings.Contains(got.Status.Error, "required claim tenant") {
		t.Fatalf("wrong tenant: %+v", got.Status)
	}
}

// TestTokenWebhook makes one authn the token webhook of another: the
// second knows no static tokens and asks the first over HTTPS with a
// client certificate.
func TestTokenWebhook(t *testing.T) {
	remoteEnv := newEnv(t, false)
	remote := start(t, remoteEnv.options(), nil)

	e := newEnv(t, false)
	keyPEM, err := pemKey(remoteEnv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster:
    server: https://%s%s
    certificate-authority: %s
users:
- name: authn
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: webhook
  context: {cluster: remote, user: authn}
current-context: webhook
`, remote.Addr(), tokenReviewPath, remoteEnv.caFile,
		base64.StdEncoding.EncodeToString(certPEM(remoteEnv)), base64.StdEncoding.EncodeToString(keyPEM))
	o := e.options()
	o.TokenAuthFile = ""
	o.TokenWebhookConfigFile = e.write(t, "webhook.kubeconfig", []byte(cfg))
	start(t, o, nil)

	got := review(t, e.nc, staticToken)
	if !got.Status.Authenticated || got.Status.User.Username != "alice" {
		t.Fatalf("status %+v, want alice from the webhook", got.Status)
	}
	if got := review(t, e.nc, "unknown"); got.Status.Authenticated || got.Status.Error != "invalid bearer token" {
		t.Fatalf("status %+v, want invalid bearer token", got.Status)
	}
}
