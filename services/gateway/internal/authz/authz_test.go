package authz_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	protoauthz "kplane.dev/proto/authz"
	"kplane.dev/services/gateway/internal/authz"
)

// responder is an authz stand-in that allows what allow says and counts
// the reviews it answers.
type responder struct {
	nc    *nats.Conn
	count atomic.Int64
	last  atomic.Pointer[authorizationv1.SubjectAccessReviewSpec]
	allow atomic.Bool
	// everyName answers a named request as holding for every name.
	everyName atomic.Bool
}

func startResponder(t testing.TB, nc *nats.Conn) *responder {
	t.Helper()
	r := &responder{nc: nc}
	err := natsrpc.NewServer(nc, slog.New(slog.DiscardHandler)).Handle(protoauthz.SubjectAccessReview, protoauthz.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(payload, &sar); err != nil {
			return nil, err
		}
		r.count.Add(1)
		r.last.Store(&sar.Spec)
		if r.allow.Load() {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
		} else {
			sar.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no RBAC policy matched"}
		}
		if ra := sar.Spec.ResourceAttributes; r.everyName.Load() && ra != nil && ra.Name != "" {
			sar.Annotations = map[string]string{protoauthz.AnnotationEveryName: "true"}
		}
		return json.Marshal(sar)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

var bob = &frontproxy.User{Name: "bob", UID: "2", Groups: []string{"developers", "system:authenticated"}, Extra: map[string][]string{"scopes": {"read"}}}

var listConfigMaps = authz.Attributes{User: bob, Verb: "list", ResourceRequest: true, Namespace: "y", APIVersion: "v1", Resource: "configmaps"}

func newAuthorizer(t *testing.T, nc *nats.Conn, o authz.Options) *authz.Authorizer {
	t.Helper()
	a, err := authz.New(nc, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Error(err)
		}
	})
	return a
}

func TestAuthorize(t *testing.T) {
	srv := natstest.Start(t)
	r := startResponder(t, srv.Connect(t))
	clk := clocktesting.NewFakeClock(time.Now())
	a := newAuthorizer(t, srv.Connect(t), authz.Options{Clock: clk})
	ctx := context.Background()

	t.Run("system:masters is not reviewed", func(t *testing.T) {
		before := r.count.Load()
		d, err := a.Authorize(ctx, authz.Attributes{User: &frontproxy.User{Name: "alice", Groups: []string{"system:masters"}}, Verb: "delete", ResourceRequest: true, Resource: "namespaces"})
		if err != nil || !d.Allowed {
			t.Fatalf("%+v %v, want allowed", d, err)
		}
		if r.count.Load() != before {
			t.Error("authz was asked about system:masters")
		}
	})

	t.Run("review carries the user and the request", func(t *testing.T) {
		r.allow.Store(true)
		d, err := a.Authorize(ctx, listConfigMaps)
		if err != nil || !d.Allowed {
			t.Fatalf("%+v %v, want allowed", d, err)
		}
		spec := r.last.Load()
		ra := spec.ResourceAttributes
		if spec.User != "bob" || spec.UID != "2" || len(spec.Groups) != 2 || spec.Extra["scopes"][0] != "read" ||
			ra == nil || ra.Verb != "list" || ra.Namespace != "y" || ra.Resource != "configmaps" || ra.Version != "v1" || spec.NonResourceAttributes != nil {
			t.Errorf("review spec %+v %+v", spec, ra)
		}
	})

	t.Run("allowed decision is cached", func(t *testing.T) {
		before := r.count.Load()
		r.allow.Store(false)
		d, err := a.Authorize(ctx, listConfigMaps)
		if err != nil || !d.Allowed || r.count.Load() != before {
			t.Errorf("%+v %v after %d reviews, want the cached allow", d, err, r.count.Load()-before)
		}
	})

	t.Run("allowed decision expires", func(t *testing.T) {
		clk.Step(authz.DefaultAuthorizedTTL + time.Second)
		d, err := a.Authorize(ctx, listConfigMaps)
		if err != nil || d.Allowed || d.Reason != "no RBAC policy matched" {
			t.Errorf("%+v %v, want a fresh denial", d, err)
		}
	})

	t.Run("denied decision is cached for its own TTL", func(t *testing.T) {
		r.allow.Store(true)
		before := r.count.Load()
		clk.Step(authz.DefaultUnauthorizedTTL - time.Second)
		if d, _ := a.Authorize(ctx, listConfigMaps); d.Allowed || r.count.Load() != before {
			t.Fatalf("%+v, want the cached denial", d)
		}
		clk.Step(2 * time.Second)
		if d, _ := a.Authorize(ctx, listConfigMaps); !d.Allowed || r.count.Load() != before+1 {
			t.Errorf("%+v, want a fresh allow", d)
		}
	})

	t.Run("non-resource review", func(t *testing.T) {
		if _, err := a.Authorize(ctx, authz.Attributes{User: bob, Verb: "get", Path: "/livez"}); err != nil {
			t.Fatal(err)
		}
		spec := r.last.Load()
		if nr := spec.NonResourceAttributes; nr == nil || nr.Path != "/livez" || nr.Verb != "get" || spec.ResourceAttributes != nil {
			t.Errorf("review spec %+v", spec)
		}
	})
}

func TestInvalidationFlushes(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	r := startResponder(t, nc)
	r.allow.Store(true)
	a := newAuthorizer(t, srv.Connect(t), authz.Options{})
	ctx := context.Background()
	if d, err := a.Authorize(ctx, listConfigMaps); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	r.allow.Store(false)
	body, _ := json.Marshal(protoauthz.Invalidation{Reason: "rolebindings/y/dev"})
	if err := nc.Publish(protoauthz.SubjectInvalidate, body); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Second)
	for {
		d, err := a.Authorize(ctx, listConfigMaps)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("cached allow still used 1s after the invalidation")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestAuthzDown(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	a := newAuthorizer(t, nc, authz.Options{Timeout: 200 * time.Millisecond})
	_, err := a.Authorize(context.Background(), listConfigMaps)
	if !apierrors.IsServiceUnavailable(err) {
		t.Fatalf("error %v, want 503", err)
	}
	// Nothing was cached: authz answers once it is back.
	r := startResponder(t, nc)
	r.allow.Store(true)
	if d, err := a.Authorize(context.Background(), listConfigMaps); err != nil || !d.Allowed {
		t.Errorf("%+v %v, want allowed once authz is back", d, err)
	}
}

func TestForbidden(t *testing.T) {
	tests := []struct {
		name   string
		attrs  authz.Attributes
		reason string
		want   string
	}{
		{"namespaced", listConfigMaps, "",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`},
		{"cluster scope with a reason", authz.Attributes{User: bob, Verb: "get", ResourceRequest: true, APIGroup: "rbac.authorization.k8s.io", Resource: "clusterroles", Name: "admin"}, "denied by policy protect",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"clusterroles.rbac.authorization.k8s.io \"admin\" is forbidden: User \"bob\" cannot get resource \"clusterroles\" in API group \"rbac.authorization.k8s.io\" at the cluster scope: denied by policy protect","reason":"Forbidden","details":{"name":"admin","group":"rbac.authorization.k8s.io","kind":"clusterroles"},"code":403}`},
		{"subresource", authz.Attributes{User: bob, Verb: "create", ResourceRequest: true, Namespace: "y", Resource: "pods", Subresource: "exec", Name: "p"}, "",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pods \"p\" is forbidden: User \"bob\" cannot create resource \"pods/exec\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"name":"p","kind":"pods"},"code":403}`},
		{"non-resource, escaped", authz.Attributes{User: &frontproxy.User{Name: "system:anonymous"}, Verb: "get", Path: "/<x>"}, "",
			`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"forbidden: User \"system:anonymous\" cannot get path \"/\u0026lt;x\u0026gt;\"","reason":"Forbidden","details":{},"code":403}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := apistatus.Status(authz.Forbidden(tt.attrs, tt.reason))
			body, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if st.Code != http.StatusForbidden || string(body) != tt.want {
				t.Errorf("body\n%s\nwant\n%s", body, tt.want)
			}
		})
	}
}

func TestDecisionForEveryName(t *testing.T) {
	srv := natstest.Start(t)
	r := startResponder(t, srv.Connect(t))
	a := newAuthorizer(t, srv.Connect(t), authz.Options{})
	ctx := context.Background()
	deleteConfigMap := func(name string) authz.Attributes {
		return authz.Attributes{User: bob, Verb: "delete", ResourceRequest: true, Namespace: "y", APIVersion: "v1", Resource: "configmaps", Name: name}
	}
	authorize := func(attrs authz.Attributes) {
		t.Helper()
		if d, err := a.Authorize(ctx, attrs); err != nil || !d.Allowed {
			t.Fatalf("%s %s: %+v %v, want allowed", attrs.Verb, attrs.Name, d, err)
		}
	}
	r.allow.Store(true)

	authorize(deleteConfigMap("a"))
	authorize(deleteConfigMap("b"))
	if n := r.count.Load(); n != 2 {
		t.Fatalf("%d reviews for two names authz did not say hold for every name, want 2", n)
	}

	r.everyName.Store(true)
	authorize(deleteConfigMap("c"))
	for _, name := range []string{"d", "e", "f"} {
		authorize(deleteConfigMap(name))
	}
	if n := r.count.Load(); n != 3 {
		t.Fatalf("%d reviews, want 3: names after one decision for every name must not be reviewed", n)
	}

	// The decision for every name is not one for the requests that name
	// no object, which RBAC decides apart.
	deleteCollection := deleteConfigMap("")
	deleteCollection.Verb = "deletecollection"
	authorize(deleteCollection)
	unnamedDelete := deleteConfigMap("")
	authorize(unnamedDelete)
	if n := r.count.Load(); n != 5 {
		t.Fatalf("%d reviews, want 5: requests without a name were answered from a decision for every name", n)
	}

	// An invalidation drops it.
	a.Flush()
	authorize(deleteConfigMap("g"))
	if n := r.count.Load(); n != 6 {
		t.Fatalf("%d reviews, want 6 after a flush", n)
	}
}

// TestDecisionKeysKeepRequestsApart asks about requests that differ only
// in where a string is split between two fields, or in a field that is
// easy to leave out of a key: each needs a review of its own, never the
// decision cached for another.
func TestDecisionKeysKeepRequestsApart(t *testing.T) {
	srv := natstest.Start(t)
	r := startResponder(t, srv.Connect(t))
	r.allow.Store(true)
	a := newAuthorizer(t, srv.Connect(t), authz.Options{})
	withUser := func(u *frontproxy.User) authz.Attributes {
		at := listConfigMaps
		at.User = u
		return at
	}
	with := func(change func(*authz.Attributes)) authz.Attributes {
		at := listConfigMaps
		change(&at)
		return at
	}
	requests := map[string]authz.Attributes{
		"bob":                     listConfigMaps,
		"groups joined":           withUser(&frontproxy.User{Name: "bob", UID: "2", Groups: []string{"developerssystem:authenticated"}, Extra: bob.Extra}),
		"a group as extra":        withUser(&frontproxy.User{Name: "bob", UID: "2", Groups: []string{"developers"}, Extra: map[string][]string{"system:authenticated": nil, "scopes": {"read"}}}),
		"extra under other key":   withUser(&frontproxy.User{Name: "bob", UID: "2", Groups: bob.Groups, Extra: map[string][]string{"scope": {"sread"}}}),
		"uid in name":             withUser(&frontproxy.User{Name: "bob2", Groups: bob.Groups, Extra: bob.Extra}),
		"namespace into group":    with(func(at *authz.Attributes) { at.Namespace, at.APIGroup = "", "y" }),
		"resource split":          with(func(at *authz.Attributes) { at.Resource, at.Subresource = "config", "maps" }),
		"named":                   with(func(at *authz.Attributes) { at.Name = "x" }),
		"named after subresource": with(func(at *authz.Attributes) { at.Resource, at.Subresource, at.Name = "configmaps", "x", "" }),
		// Without a mark after a list's count, the count 4 and the
		// first group's length 90 read as the count 49 of empty groups.
		"groups of colons":        withUser(&frontproxy.User{Name: "bob", Groups: []string{strings.Repeat("0:", 45), "", "", ""}}),
		"empty groups":            withUser(&frontproxy.User{Name: "bob", Groups: make([]string, 49)}),
		"non-resource":            {User: bob, Verb: "list", Path: "/api/v1/namespaces/y/configmaps"},
		"non-resource, same path": {User: bob, Verb: "list", ResourceRequest: true, Path: "/api/v1/namespaces/y/configmaps"},
	}
	for name, at := range requests {
		before := r.count.Load()
		if d, err := a.Authorize(context.Background(), at); err != nil || !d.Allowed {
			t.Fatalf("%s: %+v %v, want allowed", name, d, err)
		}
		if r.count.Load() != before+1 {
			t.Errorf("%s was decided from the cache of another request", name)
		}
	}
}

// BenchmarkAuthorizeCached is the cost of a decision the gateway already
// holds, which every request but the first of a user pays.
func BenchmarkAuthorizeCached(b *testing.B) {
	srv := natstest.Start(b)
	r := startResponder(b, srv.Connect(b))
	r.allow.Store(true)
	a, err := authz.New(srv.Connect(b), authz.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	get := listConfigMaps
	get.Verb, get.Name = "get", "x"
	ctx := context.Background()
	if _, err := a.Authorize(ctx, get); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if d, err := a.Authorize(ctx, get); err != nil || !d.Allowed {
			b.Fatalf("%+v %v", d, err)
		}
	}
}
