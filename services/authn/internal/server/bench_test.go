package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/natsrpc"
	authnproto "kplane.dev/proto/authn"
)

// BenchmarkTokenReview measures TokenReviews per second over NATS against
// one replica: static tokens, and service account JWTs with the token
// cache (kube's 10s success TTL) and without it (every review verifies the
// signature and looks the service account up in the informer cache).
func BenchmarkTokenReview(b *testing.B) {
	e := newEnv(b, true)
	sa, err := e.api.Client.CoreV1().ServiceAccounts("team").Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "team"}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	cached := start(b, e.options(), nil)
	uncachedOpts := e.options()
	uncachedOpts.TokenCacheSuccessTTL = 0

	tr, err := requestToken(e.nc, "team", "robot", string(sa.UID), &authenticationv1.TokenRequest{})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, token string) {
		payload, err := json.Marshal(authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}})
		if err != nil {
			b.Fatal(err)
		}
		nc := e.nats.Connect(b)
		if got := review(b, nc, token); !got.Status.Authenticated {
			b.Fatalf("token refused: %q", got.Status.Error)
		}
		b.ResetTimer()
		start := time.Now()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := natsrpc.Request(context.Background(), nc, authnproto.SubjectTokenReview, payload); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "reviews/s")
	}
	b.Run("static", func(b *testing.B) { run(b, staticToken) })
	b.Run("serviceaccount-cached", func(b *testing.B) { run(b, tr.Status.Token) })
	// A replica without a success cache takes over the queue group
	// alone. It belongs to the parent benchmark: a sub-benchmark's
	// cleanups run after each of its runs, and b.Run runs it several times.
	parent := b
	var uncached *replica
	b.Run("serviceaccount-uncached", func(b *testing.B) {
		if uncached == nil {
			cached.stop()
			uncached = start(parent, uncachedOpts, nil)
		}
		run(b, tr.Status.Token)
	})
}
