package serviceaccount_test

import (
	"context"
	"crypto"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/cache"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
)

// The chain a TokenReview goes through: bearer handling and the group adder
// around a union of the legacy and bound authenticators, with or without the
// cache, for a pod-bound token (four lookups: service account, pod, node
// skipped, secret none).
func benchChain(b *testing.B, key crypto.Signer, cached bool) {
	objs := newObjects()
	objs.add(sa, pod, node)
	ks := keys(b, key.Public())
	clk := clocktesting.NewFakePassiveClock(start)
	bound, err := serviceaccount.NewAuthenticator([]string{issuer}, ks, authenticator.Audiences{apiAud}, objs, serviceaccount.WithClock(clk))
	if err != nil {
		b.Fatal(err)
	}
	legacy, err := serviceaccount.NewLegacyAuthenticator(ks, authenticator.Audiences{apiAud}, objs)
	if err != nil {
		b.Fatal(err)
	}
	var tokens authenticator.Authenticator = authenticator.Union(legacy, bound)
	if cached {
		c, err := cache.New(tokens, cache.WithClock(clk), cache.WithSuccessTTL(time.Hour))
		if err != nil {
			b.Fatal(err)
		}
		tokens = c
	}
	chain := authenticator.Bearer(tokens, true)
	tok := sign(b, signer(b, issuer, key), boundClaims(b, sa, serviceaccount.Binding{Pod: pod, Node: node}, []string{apiAud}, time.Hour))
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := chain.AuthenticateToken(ctx, tok); !ok || err != nil {
			b.Fatalf("ok=%v err=%v", ok, err)
		}
	}
}

func BenchmarkTokenReviewBoundES256(b *testing.B)       { benchChain(b, ecKey(b), false) }
func BenchmarkTokenReviewBoundRS256(b *testing.B)       { benchChain(b, rsaKey(b), false) }
func BenchmarkTokenReviewBoundES256Cached(b *testing.B) { benchChain(b, ecKey(b), true) }
func BenchmarkTokenReviewBoundRS256Cached(b *testing.B) { benchChain(b, rsaKey(b), true) }
