package server_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	protoauthn "kplane.dev/proto/authn"
	protoauthz "kplane.dev/proto/authz"
)

// authServices stand in for the authn and authz services on a real NATS
// server: small responders on their subjects with a fixed set of tokens
// and a policy a test may change.
type authServices struct {
	nats *natstest.Server
	nc   *nats.Conn
	// reviews counts the access reviews answered, tokenReviews the token
	// reviews.
	reviews      atomic.Int64
	tokenReviews atomic.Int64
	mu           sync.Mutex
	policy       func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus
	servers      map[string]*natsrpc.Server
}

// testTokens are the tokens the token responder accepts.
var testTokens = map[string]authenticationv1.UserInfo{
	"admintoken": {Username: "admin-by-token", UID: "1", Groups: []string{"system:masters"}},
	"bobtoken":   {Username: "bob", UID: "2", Groups: []string{"developers", "testers"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"read"}}},
}

// publicPaths are what kube's system:public-info-viewer opens to all.
func publicPaths(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	if nr := spec.NonResourceAttributes; nr != nil && nr.Verb == "get" {
		for _, p := range []string{"/healthz", "/livez", "/readyz", "/version"} {
			if nr.Path == p || strings.HasPrefix(nr.Path, p+"/") {
				return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: "public"}
			}
		}
	}
	return authorizationv1.SubjectAccessReviewStatus{}
}

// startAuth runs NATS and the responders until the test ends, with the
// public health paths allowed to everyone and nothing else.
func startAuth(t *testing.T) *authServices {
	t.Helper()
	a := &authServices{nats: natstest.Start(t), policy: publicPaths}
	a.nc = a.nats.Connect(t)
	a.respond(t)
	return a
}

// setPolicy replaces the authz responder's policy.
func (a *authServices) setPolicy(p func(authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.policy = p
}

// respond subscribes the responders.
func (a *authServices) respond(t *testing.T) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	serve := func(subject, queue string, h natsrpc.Handler) {
		srv := natsrpc.NewServer(a.nc, log)
		if err := srv.Handle(subject, queue, h); err != nil {
			t.Fatal(err)
		}
		if a.servers == nil {
			a.servers = map[string]*natsrpc.Server{}
		}
		a.servers[subject] = srv
	}
	serve(protoauthn.SubjectTokenReview, protoauthn.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
		var r authenticationv1.TokenReview
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, err
		}
		a.tokenReviews.Add(1)
		if u, ok := testTokens[r.Spec.Token]; ok && slices.Contains(r.Spec.Audiences, "https://kubernetes.default.svc.cluster.local") {
			r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: u, Audiences: r.Spec.Audiences}
		} else {
			r.Status = authenticationv1.TokenReviewStatus{Error: "invalid token"}
		}
		return json.Marshal(r)
	})
	serve(protoauthz.SubjectAccessReview, protoauthz.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
		var r authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, err
		}
		a.reviews.Add(1)
		a.mu.Lock()
		r.Status = a.policy(r.Spec)
		a.mu.Unlock()
		return json.Marshal(r)
	})
	serve(protoauthn.SubjectIssuerDiscovery, protoauthn.QueueGroup, func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"issuer":"https://kubernetes.default.svc.cluster.local","jwks_uri":"https://kubernetes.default.svc.cluster.local/openid/v1/jwks"}`), nil
	})
	serve(protoauthn.SubjectIssuerKeys, protoauthn.QueueGroup, func(context.Context, []byte) ([]byte, error) {
		return []byte(`{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":"AQAB","e":"AQAB"}]}`), nil
	})
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// stopAuthz takes the authz responder away, as if every replica died.
func (a *authServices) stopAuthz(t *testing.T) {
	t.Helper()
	if err := a.servers[protoauthz.SubjectAccessReview].Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// invalidate publishes authz's invalidation.
func (a *authServices) invalidate(t *testing.T) {
	t.Helper()
	body, _ := json.Marshal(protoauthz.Invalidation{Reason: "test"})
	if err := a.nc.Publish(protoauthz.SubjectInvalidate, body); err != nil {
		t.Fatal(err)
	}
	if err := a.nc.Flush(); err != nil {
		t.Fatal(err)
	}
}
