package server

import (
	"context"
	"io"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apitest"
	"kplane.dev/libs/natsrpc"
	authnproto "kplane.dev/proto/authn"
)

// TestNoAnswersBeforeSync starts a replica whose informers cannot sync
// (its API is unreachable): it must stay out of the queue group, so that
// reviews go to replicas with full caches rather than refuse bootstrap
// tokens. With no other replica, a review finds nobody.
func TestNoAnswersBeforeSync(t *testing.T) {
	e := newEnv(t, false)
	o := e.options()
	o.Kubeconfig = apitest.UnreachableKubeconfig(t)
	o.ServiceAccountLookup, o.EnableBootstrapTokenAuth = true, true
	cfg, err := o.Config(io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apitest.Run(t, "authn", s.Run)
	nc := e.nats.Connect(t)
	// The static token needs no cache: only the missing subscription
	// keeps it from being answered.
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	var out authenticationv1.TokenReview
	err = natsrpc.RequestJSON(ctx, nc, authnproto.SubjectTokenReview,
		authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: staticToken}}, &out)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("review before the informers synced: %v (status %+v), want 503: no replica answers", err, out.Status)
	}
}
