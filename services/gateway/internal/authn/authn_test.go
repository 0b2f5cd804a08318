package authn_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	"kplane.dev/libs/pki"
	protoauthn "kplane.dev/proto/authn"
	"kplane.dev/services/gateway/internal/authn"
)

// fixture is a token responder on a real NATS server, certificates of
// two CAs, and the clock the authenticators' caches read.
type fixture struct {
	reviews  atomic.Int64
	valid    atomic.Bool
	lastAuds atomic.Pointer[[]string]
	clock    *clocktesting.FakeClock
	clientCA *pki.Cert
	proxyCA  *pki.Cert
	nats     *natstest.Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{clock: clocktesting.NewFakeClock(time.Now()), nats: natstest.Start(t)}
	f.valid.Store(true)
	f.clientCA, f.proxyCA = newCA(t, "client-ca"), newCA(t, "front-proxy-ca")
	err := natsrpc.NewServer(f.nats.Connect(t), slog.New(slog.DiscardHandler)).Handle(protoauthn.SubjectTokenReview, protoauthn.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
		var r authenticationv1.TokenReview
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, err
		}
		f.reviews.Add(1)
		f.lastAuds.Store(&r.Spec.Audiences)
		switch {
		case r.Spec.Token == "good" && f.valid.Load():
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:ns:sa", UID: "u-1", Groups: []string{"system:serviceaccounts"},
				Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/credential-id": {"JTI=1"}},
			}}
		case r.Spec.Token == "other-audience":
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "x"}, Audiences: []string{"vault"}}
		default:
			r.Status = authenticationv1.TokenReviewStatus{Error: "invalid token"}
		}
		return json.Marshal(r)
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) authenticator(t *testing.T, anonymous bool) *authn.Authenticator {
	t.Helper()
	return authn.New(f.nats.Connect(t), authn.Options{
		ClientCA: f.clientCA.Pool(),
		RequestHeader: &authn.RequestHeader{
			ClientCA:     f.proxyCA.Pool(),
			AllowedNames: []string{"front-proxy-client"},
			Headers:      frontproxy.DefaultHeaders(),
		},
		Audiences: []string{authn.DefaultAudience},
		Anonymous: anonymous,
		Clock:     f.clock,
		Timeout:   time.Second,
	})
}

func newCA(t *testing.T, name string) *pki.Cert {
	t.Helper()
	ca, err := pki.NewCA(name, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func cert(t *testing.T, ca *pki.Cert, user string, groups ...string) *x509.Certificate {
	t.Helper()
	c, err := ca.Client(user, groups, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return c.Cert
}

func request(c *x509.Certificate, header http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/api", nil)
	r.TLS = nil
	if c != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}}
	}
	for k, v := range header {
		r.Header[k] = v
	}
	return r
}

func TestAuthenticate(t *testing.T) {
	f := newFixture(t)
	a := f.authenticator(t, true)
	noAnonymous := f.authenticator(t, false)
	ws := func(protocols string) http.Header {
		return http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Protocol": {protocols}}
	}
	bearerProtocol := "base64url.bearer.authorization.k8s.io." + base64.RawURLEncoding.EncodeToString([]byte("good"))
	tests := []struct {
		name     string
		a        *authn.Authenticator
		req      *http.Request
		want     *frontproxy.User
		wantErr  bool
		wantLeft http.Header
		wantGone []string
	}{
		{name: "client certificate", a: a, req: request(cert(t, f.clientCA, "alice", "ops", "devs"), nil),
			want: &frontproxy.User{Name: "alice", Groups: []string{"ops", "devs", "system:authenticated"}}},
		{name: "certificate of another CA", a: a, req: request(cert(t, newCA(t, "other-ca"), "eve"), nil), wantErr: true},
		{name: "certificate wins over a bad token", a: a, req: request(cert(t, f.clientCA, "alice"), http.Header{"Authorization": {"Bearer bad"}}),
			want: &frontproxy.User{Name: "alice", Groups: []string{"system:authenticated"}}},
		{name: "front proxy with an allowed name", a: a,
			req: request(cert(t, f.proxyCA, "front-proxy-client"), http.Header{
				"X-Remote-User": {"dave"}, "X-Remote-Uid": {"d-1"}, "X-Remote-Group": {"g1", "g2"},
				"X-Remote-Extra-Acme.com%2fproject": {"p1"},
			}),
			want:     &frontproxy.User{Name: "dave", UID: "d-1", Groups: []string{"g1", "g2", "system:authenticated"}, Extra: map[string][]string{"acme.com/project": {"p1"}}},
			wantGone: []string{"X-Remote-User", "X-Remote-Uid", "X-Remote-Group", "X-Remote-Extra-Acme.com%2fproject"}},
		{name: "front proxy CA with another name", a: a,
			req: request(cert(t, f.proxyCA, "someone"), http.Header{"X-Remote-User": {"dave"}}), wantErr: true},
		{name: "client CA certificate cannot send request headers", a: a,
			req:  request(cert(t, f.clientCA, "front-proxy-client"), http.Header{"X-Remote-User": {"dave"}}),
			want: &frontproxy.User{Name: "front-proxy-client", Groups: []string{"system:authenticated"}}},
		{name: "bearer token", a: a, req: request(nil, http.Header{"Authorization": {"Bearer good"}}),
			want: &frontproxy.User{Name: "system:serviceaccount:ns:sa", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra: map[string][]string{"authentication.kubernetes.io/credential-id": {"JTI=1"}}},
			wantGone: []string{"Authorization"}},
		{name: "bad token is refused with anonymous on", a: a, req: request(nil, http.Header{"Authorization": {"Bearer bad"}}), wantErr: true},
		{name: "token for another audience", a: a, req: request(nil, http.Header{"Authorization": {"Bearer other-audience"}}), wantErr: true},
		{name: "basic auth is no credential", a: a, req: request(nil, http.Header{"Authorization": {"Basic eDp5"}}),
			want: &frontproxy.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "no credentials", a: a, req: request(nil, nil),
			want: &frontproxy.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}},
		{name: "no credentials, anonymous off", a: noAnonymous, req: request(nil, nil), wantErr: true},
		{name: "websocket bearer protocol", a: a, req: request(nil, ws(bearerProtocol+", v4.channel.k8s.io")),
			want:     &frontproxy.User{Name: "system:serviceaccount:ns:sa", UID: "u-1", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
			wantLeft: http.Header{"Sec-Websocket-Protocol": {"v4.channel.k8s.io"}}},
		{name: "websocket bearer protocol alone", a: a, req: request(nil, ws(bearerProtocol)), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := tt.a.Authenticate(tt.req)
			if tt.wantErr {
				if !apierrors.IsUnauthorized(err) {
					t.Fatalf("user %+v, error %v, want 401", u, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if u.Name != tt.want.Name || u.UID != tt.want.UID || !slices.Equal(u.Groups, tt.want.Groups) {
				t.Errorf("user %+v, want %+v", u, tt.want)
			}
			for k, v := range tt.want.Extra {
				if !slices.Equal(u.Extra[k], v) {
					t.Errorf("extra %q = %q, want %q", k, u.Extra[k], v)
				}
			}
			for _, h := range tt.wantGone {
				if v := tt.req.Header.Values(h); len(v) > 0 {
					t.Errorf("header %s %q left on the request", h, v)
				}
			}
			for k, v := range tt.wantLeft {
				if got := tt.req.Header.Values(k); !slices.Equal(got, v) {
					t.Errorf("header %s %q, want %q", k, got, v)
				}
			}
		})
	}
	if auds := f.lastAuds.Load(); auds == nil || !slices.Equal(*auds, []string{authn.DefaultAudience}) {
		t.Errorf("token reviews for audiences %v, want the API audience", auds)
	}
}

// TestTokenCache reuses a successful review for 10s, never a failed one.
func TestTokenCache(t *testing.T) {
	f := newFixture(t)
	a := f.authenticator(t, true)
	auth := func(token string) error {
		_, err := a.Authenticate(request(nil, http.Header{"Authorization": {"Bearer " + token}}))
		return err
	}
	for range 3 {
		if err := auth("good"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.reviews.Load(); got != 1 {
		t.Errorf("%d reviews of one good token, want 1", got)
	}
	for range 2 {
		if err := auth("bad"); err == nil {
			t.Fatal("bad token accepted")
		}
	}
	if got := f.reviews.Load(); got != 3 {
		t.Errorf("%d reviews after two bad tokens, want 3: failures are not cached", got)
	}
	f.valid.Store(false)
	f.clock.Step(9 * time.Second)
	if err := auth("good"); err != nil {
		t.Errorf("cached success not used within its TTL: %v", err)
	}
	f.clock.Step(2 * time.Second)
	if err := auth("good"); err == nil {
		t.Error("revoked token accepted after the cache TTL")
	}
}

// TestTokenCacheFlush forgets a cached success at once, as the gateway
// does when its NATS connection drops.
func TestTokenCacheFlush(t *testing.T) {
	f := newFixture(t)
	a := f.authenticator(t, true)
	auth := func() error {
		_, err := a.Authenticate(request(nil, http.Header{"Authorization": {"Bearer good"}}))
		return err
	}
	if err := auth(); err != nil {
		t.Fatal(err)
	}
	f.valid.Store(false)
	a.Flush()
	if err := auth(); err == nil {
		t.Errorf("revoked token accepted from the cache after a flush (%d reviews)", f.reviews.Load())
	}
}
