package webhook_test

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"

	"kplane.dev/libs/pki"
	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/webhook"
)

// remote is a TokenReview service that knows one token, requires a client
// certificate and counts the reviews it answers.
type remote struct {
	url        string
	configFile string
	reviews    atomic.Int32
	lastAuds   atomic.Value // []string
}

func startRemote(t *testing.T, statusAuds []string) *remote {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("webhook-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("localhost", []string{"127.0.0.1", "localhost"}, now)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Client("kplane-authn", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	r := &remote{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPost || req.URL.Path != "/authenticate" {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		var review authenticationv1.TokenReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Kind != "TokenReview" {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		r.reviews.Add(1)
		r.lastAuds.Store(review.Spec.Audiences)
		switch review.Spec.Token {
		case "good":
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: statusAuds,
				User: authenticationv1.UserInfo{Username: "remote-user", UID: "u1", Groups: []string{"remote"},
					Extra: map[string]authenticationv1.ExtraValue{"scope": {"all"}}}}
		case "broken":
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		default:
			review.Status = authenticationv1.TokenReviewStatus{Error: "token unknown to the remote"}
		}
		_ = json.NewEncoder(w).Encode(review)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving.TLSCertificate()}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/authenticate"

	keyPEM, err := client.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "client.crt"), client.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "client.key"), keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	r.configFile = filepath.Join(dir, "webhook.kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: remote
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: authn
  user:
    client-certificate: client.crt
    client-key: client.key
contexts:
- name: webhook
  context: {cluster: remote, user: authn}
current-context: webhook
`, r.url, base64.StdEncoding.EncodeToString(ca.CertPEM()))
	if err := os.WriteFile(r.configFile, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestWebhook(t *testing.T) {
	implicit := authenticator.Audiences{"https://kubernetes.default.svc.cluster.local"}
	tests := []struct {
		name       string
		statusAuds []string
		token      string
		auds       authenticator.Audiences // nil: none asked
		wantOK     bool
		wantErr    string
		wantAuds   authenticator.Audiences
	}{
		{name: "accepted without audiences", token: "good", wantOK: true},
		{name: "accepted for the implicit audience", token: "good", auds: implicit, wantOK: true, wantAuds: implicit},
		{name: "remote names the audience", token: "good", statusAuds: []string{"vault"}, auds: authenticator.Audiences{"vault", "x"},
			wantOK: true, wantAuds: authenticator.Audiences{"vault"}},
		{name: "audience neither implicit nor named", token: "good", auds: authenticator.Audiences{"vault"}},
		{name: "refused with the remote's error", token: "bad", wantErr: "token unknown to the remote"},
		{name: "remote failure", token: "broken", wantErr: "500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := startRemote(t, tt.statusAuds)
			a, err := webhook.NewFromFile(r.configFile, implicit)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tt.auds != nil {
				ctx = authenticator.WithAudiences(ctx, tt.auds)
			}
			resp, ok, err := a.AuthenticateToken(ctx, tt.token)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || ok != tt.wantOK {
				t.Fatalf("got ok=%v err=%v, want ok=%v", ok, err, tt.wantOK)
			}
			if got, _ := r.lastAuds.Load().([]string); !cmp.Equal([]string(tt.auds), got, cmpEmpty) {
				t.Errorf("remote was asked for audiences %q, want %q", got, tt.auds)
			}
			if !ok {
				return
			}
			want := authenticator.UserInfo{Name: "remote-user", UID: "u1", Groups: []string{"remote"}, Extra: map[string][]string{"scope": {"all"}}}
			if diff := cmp.Diff(want, resp.User); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
			if !cmp.Equal(tt.wantAuds, resp.Audiences, cmpEmpty) {
				t.Errorf("audiences %q, want %q", resp.Audiences, tt.wantAuds)
			}
		})
	}
}

var cmpEmpty = cmp.FilterValues(func(a, b any) bool { return isEmpty(a) && isEmpty(b) }, cmp.Ignore())

func isEmpty(v any) bool {
	switch v := v.(type) {
	case []string:
		return len(v) == 0
	case authenticator.Audiences:
		return len(v) == 0
	}
	return false
}

func TestWebhookNeedsClientCertificate(t *testing.T) {
	r := startRemote(t, nil)
	a, err := webhook.NewFromFile(r.configFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.AuthenticateToken(context.Background(), "good"); !ok || err != nil {
		t.Fatalf("with the client certificate: ok=%v err=%v", ok, err)
	}
	// Without the user's certificate the remote refuses the handshake.
	cfg := strings.ReplaceAll(mustRead(t, r.configFile), "client-certificate: client.crt\n    client-key: client.key", "{}")
	if strings.Contains(cfg, "client.crt") {
		t.Fatalf("config not rewritten:\n%s", cfg)
	}
	noCert := filepath.Join(filepath.Dir(r.configFile), "nocert.kubeconfig")
	if err := os.WriteFile(noCert, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err = webhook.NewFromFile(noCert, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := a.AuthenticateToken(context.Background(), "good"); ok || err == nil {
		t.Fatalf("without a client certificate: ok=%v err=%v, want an error", ok, err)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
