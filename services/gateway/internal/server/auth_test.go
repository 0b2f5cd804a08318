package server_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/server"
)

// allowBob lets bob list configmaps in namespace y, impersonate jane, and
// get /foo; the public paths stay open.
func allowBob(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	ra, nr := spec.ResourceAttributes, spec.NonResourceAttributes
	switch {
	case spec.User == "bob" && ra != nil && ra.Verb == "list" && ra.Resource == "configmaps" && ra.Namespace == "y":
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	case spec.User == "bob" && ra != nil && ra.Verb == "impersonate" && ra.Resource == "users" && ra.Name == "jane":
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	case spec.User == "bob" && nr != nil && nr.Path == "/foo":
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	case spec.User == "jane" && ra != nil && ra.Resource == "secrets":
		return authorizationv1.SubjectAccessReviewStatus{Reason: "jane is not trusted with secrets"}
	}
	return publicPaths(spec)
}

// TestAuthorization checks the decisions the gateway takes from authz:
// system:masters never asks, a decision is reused until authz announces
// a change, and impersonation is authorized before it applies.
func TestAuthorization(t *testing.T) {
	in := start(t, 1, nil)
	in.auth.setPolicy(allowBob)
	cmPath := "/api/v1/namespaces/y/configmaps"

	t.Run("system:masters never asks authz", func(t *testing.T) {
		before := in.auth.reviews.Load()
		for _, p := range []string{cmPath, "/api", "/livez", "/apis/rbac.authorization.k8s.io/v1/clusterroles"} {
			if code, body, _ := in.get(t, in.admin, "", p, nil); code != 200 {
				t.Fatalf("GET %s: %d %s", p, code, body)
			}
		}
		if got := in.auth.reviews.Load() - before; got != 0 {
			t.Errorf("%d access reviews for system:masters, want 0", got)
		}
	})

	t.Run("decision cached, then flushed by an invalidation", func(t *testing.T) {
		before := in.auth.reviews.Load()
		for range 3 {
			if code, body, _ := in.get(t, nil, "bobtoken", cmPath, nil); code != 200 {
				t.Fatalf("bob lists configmaps: %d %s", code, body)
			}
		}
		if got := in.auth.reviews.Load() - before; got != 1 {
			t.Errorf("%d access reviews for three identical requests, want 1", got)
		}
		in.auth.setPolicy(publicPaths)
		if code, _, _ := in.get(t, nil, "bobtoken", cmPath, nil); code != 200 {
			t.Fatalf("cached allow not used: %d", code)
		}
		in.auth.invalidate(t)
		deadline := time.Now().Add(time.Second)
		for {
			code, body, _ := in.get(t, nil, "bobtoken", cmPath, nil)
			if code == http.StatusForbidden {
				want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`
				if strings.TrimSpace(string(body)) != want {
					t.Errorf("body\n%s\nwant\n%s", body, want)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still %d 1s after the invalidation", code)
			}
			time.Sleep(20 * time.Millisecond)
		}
		in.auth.setPolicy(allowBob)
		in.auth.invalidate(t)
	})

	t.Run("authz's reason is appended", func(t *testing.T) {
		code, body, _ := in.get(t, nil, "bobtoken", "/api/v1/namespaces/y/secrets", http.Header{"Impersonate-User": {"jane"}})
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"secrets is forbidden: User \"jane\" cannot list resource \"secrets\" in API group \"\" in the namespace \"y\": jane is not trusted with secrets","reason":"Forbidden","details":{"kind":"secrets"},"code":403}`
		if code != http.StatusForbidden || strings.TrimSpace(string(body)) != want {
			t.Errorf("%d\n%s\nwant\n%s", code, body, want)
		}
	})

	t.Run("impersonation refused", func(t *testing.T) {
		code, body, _ := in.get(t, nil, "bobtoken", cmPath, http.Header{"Impersonate-User": {"root"}})
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"users \"root\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"name":"root","kind":"users"},"code":403}`
		if code != http.StatusForbidden || strings.TrimSpace(string(body)) != want {
			t.Errorf("%d\n%s\nwant\n%s", code, body, want)
		}
	})

	t.Run("impersonated user is authorized as itself", func(t *testing.T) {
		code, body, _ := in.get(t, nil, "bobtoken", cmPath, http.Header{"Impersonate-User": {"jane"}})
		want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"jane\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`
		if code != http.StatusForbidden || strings.TrimSpace(string(body)) != want {
			t.Errorf("%d\n%s\nwant\n%s", code, body, want)
		}
	})

	t.Run("issuer documents", func(t *testing.T) {
		for _, tt := range []struct{ path, contentType, prefix string }{
			{"/.well-known/openid-configuration", "application/json", `{"issuer":"https://kubernetes.default.svc.cluster.local"`},
			{"/openid/v1/jwks", "application/jwk-set+json", `{"keys":[{"kty":"RSA"`},
		} {
			code, body, header := in.get(t, in.admin, "", tt.path, nil)
			if code != 200 || header.Get("Content-Type") != tt.contentType || !strings.HasPrefix(string(body), tt.prefix) {
				t.Errorf("GET %s: %d %q %s", tt.path, code, header.Get("Content-Type"), body)
			}
			// Authorized like any non-resource path.
			code, body, _ = in.get(t, nil, "", tt.path, nil)
			if code != http.StatusForbidden || !strings.Contains(string(body), `User \"system:anonymous\" cannot get path \"`+tt.path+`\"`) {
				t.Errorf("anonymous GET %s: %d %s", tt.path, code, body)
			}
		}
	})
}

// TestRequestHeader authenticates the front proxy's request headers only
// from a client certificate of the request-header CA with an allowed
// name; any other certificate is its own user.
func TestRequestHeader(t *testing.T) {
	in := start(t, 1, func(o *server.Options) {
		o.RequestHeader.ClientCAFile = o.ClientCAFile
		o.RequestHeader.AllowedNames = []string{frontproxy.ClientName}
	})
	in.auth.setPolicy(allowBob)
	proxyCert := in.certs.client(t, frontproxy.ClientName)
	carol := in.certs.client(t, "carol", "developers")
	headers := http.Header{"X-Remote-User": {"bob"}, "X-Remote-Group": {"developers"}}
	t.Run("allowed name", func(t *testing.T) {
		if code, body, _ := in.get(t, proxyCert, "", "/foo", headers); code != 404 {
			t.Errorf("bob through the front proxy GET /foo: %d %s, want core's 404", code, body)
		}
	})
	t.Run("other name", func(t *testing.T) {
		code, body, _ := in.get(t, carol, "", "/foo", headers)
		if code != http.StatusForbidden || !strings.Contains(string(body), `User \"carol\" cannot get path \"/foo\"`) {
			t.Errorf("carol sending request headers: %d %s, want 403 as carol", code, body)
		}
	})
}
