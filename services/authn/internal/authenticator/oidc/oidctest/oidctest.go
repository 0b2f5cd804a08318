package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"kplane.dev/services/authn/internal/authenticator/oidc"
)

// Provider is a running test issuer.
type Provider struct {
	// URL is the issuer URL (https, no trailing slash).
	URL string
	// CA verifies the issuer's serving certificate.
	CA *x509.CertPool
	// CAPEM is CA as PEM, for a --oidc-ca-file.
	CAPEM []byte

	mu       sync.Mutex
	keys     []*signingKey // published; the last one signs
	jwksHits int
}

type signingKey struct {
	kid string
	key *rsa.PrivateKey
}

// Start runs an issuer until the test ends.
func Start(t testing.TB) *Provider {
	t.Helper()
	p := &Provider{}
	p.Rotate(t, false)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, map[string]any{
			"issuer":                                p.URL,
			"jwks_uri":                              p.URL + "/keys",
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		p.mu.Lock()
		p.jwksHits++
		var keys []map[string]string
		for _, k := range p.keys {
			jwk, err := oidc.JWK(k.kid, &k.key.PublicKey)
			if err != nil {
				p.mu.Unlock()
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			keys = append(keys, jwk)
		}
		p.mu.Unlock()
		writeJSON(w, map[string]any{"keys": keys})
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.CA = x509.NewCertPool()
	p.CA.AddCert(srv.Certificate())
	p.CAPEM = pemCert(srv.Certificate())
	return p
}

// Rotate adds a new signing key; with dropOld, the old keys are no longer
// published.
func (p *Provider) Rotate(t testing.TB, dropOld bool) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("generate key: %v", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := &signingKey{kid: fmt.Sprintf("key-%d", len(p.keys)+1), key: key}
	if dropOld {
		p.keys = nil
	}
	p.keys = append(p.keys, k)
}

// JWKSFetches is how many times the key set was fetched.
func (p *Provider) JWKSFetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.jwksHits
}

// Sign signs claims with the current key; iss is set to the issuer unless
// claims has one.
func (p *Provider) Sign(t testing.TB, claims jwt.MapClaims) string {
	t.Helper()
	p.mu.Lock()
	k := p.keys[len(p.keys)-1]
	p.mu.Unlock()
	c := jwt.MapClaims{"iss": p.URL}
	for name, v := range claims {
		c[name] = v
	}
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.key)
	if err != nil {
		t.Fatalf("sign token: %v", err)
	}
	return s
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
