package oidc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/oidc"
	"kplane.dev/services/authn/internal/authenticator/oidc/oidctest"
)

func TestClaimMapping(t *testing.T) {
	p := oidctest.Start(t)
	now := time.Now()
	exp := now.Add(time.Hour).Unix()
	base := func(extra jwt.MapClaims) jwt.MapClaims {
		c := jwt.MapClaims{"sub": "alice", "aud": "kplane", "exp": exp, "email": "alice@example.com"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	tests := []struct {
		name    string
		opts    oidc.Options
		claims  jwt.MapClaims
		want    *authenticator.UserInfo
		wantErr string // substring; empty means success
	}{
		{name: "sub gets the issuer prefix by default", claims: base(nil),
			want: &authenticator.UserInfo{Name: p.URL + "#alice"}},
		{name: "dash disables the prefix", opts: oidc.Options{UsernamePrefix: "-"}, claims: base(nil),
			want: &authenticator.UserInfo{Name: "alice"}},
		{name: "explicit prefix", opts: oidc.Options{UsernamePrefix: "oidc:"}, claims: base(nil),
			want: &authenticator.UserInfo{Name: "oidc:alice"}},
		{name: "email has no default prefix", opts: oidc.Options{UsernameClaim: "email"}, claims: base(nil),
			want: &authenticator.UserInfo{Name: "alice@example.com"}},
		{name: "verified email", opts: oidc.Options{UsernameClaim: "email"}, claims: base(jwt.MapClaims{"email_verified": true}),
			want: &authenticator.UserInfo{Name: "alice@example.com"}},
		{name: "unverified email refused", opts: oidc.Options{UsernameClaim: "email"}, claims: base(jwt.MapClaims{"email_verified": false}),
			wantErr: "oidc: email not verified"},
		{name: "missing username claim", opts: oidc.Options{UsernameClaim: "name"}, claims: base(nil),
			wantErr: `oidc: parse username claims "name"`},
		{name: "groups array with prefix", opts: oidc.Options{UsernamePrefix: "-", GroupsClaim: "groups", GroupsPrefix: "oidc:"},
			claims: base(jwt.MapClaims{"groups": []any{"dev", "ops"}}),
			want:   &authenticator.UserInfo{Name: "alice", Groups: []string{"oidc:dev", "oidc:ops"}}},
		{name: "groups string", opts: oidc.Options{UsernamePrefix: "-", GroupsClaim: "groups"},
			claims: base(jwt.MapClaims{"groups": "dev"}),
			want:   &authenticator.UserInfo{Name: "alice", Groups: []string{"dev"}}},
		{name: "groups claim absent", opts: oidc.Options{UsernamePrefix: "-", GroupsClaim: "groups"},
			claims: base(nil), want: &authenticator.UserInfo{Name: "alice"}},
		{name: "groups of a wrong type", opts: oidc.Options{GroupsClaim: "groups"},
			claims: base(jwt.MapClaims{"groups": 7}), wantErr: `oidc: parse groups claim "groups"`},
		{name: "required claim present", opts: oidc.Options{UsernamePrefix: "-", RequiredClaims: map[string]string{"hd": "example.com"}},
			claims: base(jwt.MapClaims{"hd": "example.com"}), want: &authenticator.UserInfo{Name: "alice"}},
		{name: "required claim missing", opts: oidc.Options{RequiredClaims: map[string]string{"hd": "example.com"}},
			claims: base(nil), wantErr: "oidc: required claim hd not found in ID Token"},
		{name: "required claim differs", opts: oidc.Options{RequiredClaims: map[string]string{"hd": "example.com"}},
			claims: base(jwt.MapClaims{"hd": "evil.com"}), wantErr: "oidc: required claim hd value does not match. Got = evil.com, want = example.com"},
		{name: "audience without the client id", claims: base(jwt.MapClaims{"aud": []string{"other"}}),
			wantErr: `oidc: expected audience "kplane" got ["other"]`},
		{name: "audience list with the client id", opts: oidc.Options{UsernamePrefix: "-"}, claims: base(jwt.MapClaims{"aud": []string{"other", "kplane"}}),
			want: &authenticator.UserInfo{Name: "alice"}},
		{name: "expired", claims: base(jwt.MapClaims{"exp": now.Add(-time.Minute).Unix()}),
			wantErr: "token is expired"},
		{name: "no expiry", claims: jwt.MapClaims{"sub": "alice", "aud": "kplane"},
			wantErr: "oidc: token is expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			o.IssuerURL, o.ClientID, o.CA = p.URL, "kplane", p.CA
			a, err := oidc.New(o)
			if err != nil {
				t.Fatal(err)
			}
			resp, ok, err := a.AuthenticateToken(context.Background(), p.Sign(t, tt.claims))
			if tt.wantErr != "" {
				if ok || err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got ok=%v err=%v, want error containing %q", ok, err, tt.wantErr)
				}
				return
			}
			if err != nil || !ok {
				t.Fatalf("got ok=%v err=%v, want success", ok, err)
			}
			if diff := cmp.Diff(*tt.want, resp.User); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOtherIssuerIsNoOpinion(t *testing.T) {
	p := oidctest.Start(t)
	a, err := oidc.New(oidc.Options{IssuerURL: p.URL, ClientID: "kplane", CA: p.CA})
	if err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{
		"other issuer": p.Sign(t, jwt.MapClaims{"iss": "https://elsewhere", "sub": "a", "aud": "kplane", "exp": time.Now().Add(time.Hour).Unix()}),
		"not a jwt":    "abc.def",
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok, err := a.AuthenticateToken(context.Background(), token); ok || err != nil {
				t.Fatalf("got ok=%v err=%v, want no opinion", ok, err)
			}
		})
	}
}

func TestUntrustedIssuerCertificate(t *testing.T) {
	p := oidctest.Start(t)
	// The system pool does not trust the test server's certificate.
	a, err := oidc.New(oidc.Options{IssuerURL: p.URL, ClientID: "kplane"})
	if err != nil {
		t.Fatal(err)
	}
	tok := p.Sign(t, jwt.MapClaims{"sub": "a", "aud": "kplane", "exp": time.Now().Add(time.Hour).Unix()})
	if _, ok, err := a.AuthenticateToken(context.Background(), tok); ok || err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("got ok=%v err=%v, want a certificate error", ok, err)
	}
}

func TestKeyRotation(t *testing.T) {
	p := oidctest.Start(t)
	clk := clocktesting.NewFakeClock(time.Now())
	a, err := oidc.New(oidc.Options{IssuerURL: p.URL, ClientID: "kplane", CA: p.CA, UsernamePrefix: "-"},
		oidc.WithClock(clk), oidc.WithRefreshInterval(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{"sub": "alice", "aud": "kplane", "exp": clk.Now().Add(time.Hour).Unix()}
	authn := func(tok string) error {
		_, ok, err := a.AuthenticateToken(context.Background(), tok)
		if err == nil && !ok {
			t.Fatal("no opinion on an own token")
		}
		return err
	}
	old := p.Sign(t, claims)
	if err := authn(old); err != nil {
		t.Fatalf("first key: %v", err)
	}
	if got := p.JWKSFetches(); got != 1 {
		t.Fatalf("key set fetched %d times, want 1", got)
	}

	// A new key right after a fetch waits for the refresh interval: an
	// unknown kid must not fetch on every token.
	clk.Step(time.Second)
	p.Rotate(t, true)
	rotated := p.Sign(t, claims)
	if err := authn(rotated); err == nil {
		t.Fatal("token of a new key accepted within the refresh interval")
	}
	if err := authn(rotated); err == nil {
		t.Fatal("token of a new key accepted within the refresh interval")
	}
	if got := p.JWKSFetches(); got != 1 {
		t.Fatalf("key set fetched %d times within the refresh interval, want 1", got)
	}

	clk.Step(10 * time.Second)
	if err := authn(rotated); err != nil {
		t.Fatalf("rotated key after the interval: %v", err)
	}
	if got := p.JWKSFetches(); got != 2 {
		t.Fatalf("key set fetched %d times, want 2", got)
	}
	// The old key is no longer published, so its tokens stop working.
	if err := authn(old); err == nil {
		t.Fatal("token of a withdrawn key accepted")
	}
}

func TestUsernamePrefix(t *testing.T) {
	tests := []struct{ claim, prefix, want string }{
		{"sub", "", "https://issuer#"},
		{"email", "", ""},
		{"sub", "-", ""},
		{"email", "-", ""},
		{"email", "x:", "x:"},
		{"name", "y:", "y:"},
	}
	for _, tt := range tests {
		t.Run(tt.claim+"/"+tt.prefix, func(t *testing.T) {
			if got := oidc.UsernamePrefix("https://issuer", tt.claim, tt.prefix); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
