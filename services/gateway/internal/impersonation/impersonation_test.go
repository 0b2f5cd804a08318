package impersonation_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/natstest"
	protoauthz "kplane.dev/proto/authz"
	"kplane.dev/services/gateway/internal/authz"
	"kplane.dev/services/gateway/internal/impersonation"
)

// grants are what bob may impersonate, as "resource/subresource:namespace/name"
// keys of the impersonate checks authz is asked.
var grants = map[string]bool{
	"users:/jane":                    true,
	"groups:/developers":             true,
	"groups:/system:authenticated":   true,
	"uids:/1234":                     true,
	"userextras/scopes:/read":        true,
	"serviceaccounts:ns1/builder":    true,
	"users:/system:anonymous":        true,
	"groups:/system:unauthenticated": true,
}

// startAuthz answers access reviews from grants over a real NATS server
// and records each check, and returns an authorizer of the gateway's.
func startAuthz(t *testing.T) (*authz.Authorizer, func() []string) {
	t.Helper()
	srv := natstest.Start(t)
	var mu sync.Mutex
	var asked []string
	err := natsrpc.NewServer(srv.Connect(t), slog.New(slog.DiscardHandler)).Handle(protoauthz.SubjectAccessReview, protoauthz.QueueGroup, func(_ context.Context, payload []byte) ([]byte, error) {
		var sar authorizationv1.SubjectAccessReview
		if err := json.Unmarshal(payload, &sar); err != nil {
			return nil, err
		}
		ra := sar.Spec.ResourceAttributes
		res := ra.Resource
		if ra.Subresource != "" {
			res += "/" + ra.Subresource
		}
		key := res + ":" + ra.Namespace + "/" + ra.Name
		mu.Lock()
		asked = append(asked, ra.Verb+" "+ra.Group+"/"+ra.Version+" "+key)
		mu.Unlock()
		sar.Status.Allowed = sar.Spec.User == "bob" && ra.Verb == "impersonate" && grants[key]
		return json.Marshal(sar)
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(srv.Connect(t), authz.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := slices.Clone(asked)
		asked = nil
		return out
	}
}

func TestImpersonate(t *testing.T) {
	a, asked := startAuthz(t)
	bob := &frontproxy.User{Name: "bob", Groups: []string{"system:authenticated"}}
	tests := []struct {
		name      string
		header    http.Header
		want      *frontproxy.User
		wantAsked []string
		wantErr   string
	}{
		{name: "none", header: http.Header{"Accept": {"application/json"}}},
		{name: "user", header: http.Header{"Impersonate-User": {"jane"}},
			want:      &frontproxy.User{Name: "jane", Groups: []string{"system:authenticated"}},
			wantAsked: []string{"impersonate / users:/jane"}},
		{name: "user, groups, uid and extra",
			header: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Group": {"developers"}, "Impersonate-Uid": {"1234"}, "Impersonate-Extra-Scopes": {"read"}},
			want:   &frontproxy.User{Name: "jane", UID: "1234", Groups: []string{"developers", "system:authenticated"}, Extra: map[string][]string{"scopes": {"read"}}},
			wantAsked: []string{"impersonate / users:/jane", "impersonate / groups:/developers",
				"impersonate authentication.k8s.io/v1 userextras/scopes:/read", "impersonate authentication.k8s.io/v1 uids:/1234"}},
		{name: "service account gets its groups",
			header:    http.Header{"Impersonate-User": {"system:serviceaccount:ns1:builder"}},
			want:      &frontproxy.User{Name: "system:serviceaccount:ns1:builder", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns1", "system:authenticated"}},
			wantAsked: []string{"impersonate / serviceaccounts:ns1/builder"}},
		{name: "anonymous is unauthenticated",
			header:    http.Header{"Impersonate-User": {"system:anonymous"}},
			want:      &frontproxy.User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}},
			wantAsked: []string{"impersonate / users:/system:anonymous"}},
		{name: "explicit system:authenticated is not repeated",
			header:    http.Header{"Impersonate-User": {"jane"}, "Impersonate-Group": {"system:authenticated"}},
			want:      &frontproxy.User{Name: "jane", Groups: []string{"system:authenticated"}},
			wantAsked: []string{"impersonate / users:/jane", "impersonate / groups:/system:authenticated"}},
		{name: "user refused", header: http.Header{"Impersonate-User": {"root"}},
			wantErr:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"users \"root\" is forbidden: User \"bob\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"name":"root","kind":"users"},"code":403}`,
			wantAsked: []string{"impersonate / users:/root"}},
		{name: "group refused", header: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Group": {"system:masters"}},
			wantErr:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"groups \"system:masters\" is forbidden: User \"bob\" cannot impersonate resource \"groups\" in API group \"\" at the cluster scope","reason":"Forbidden","details":{"name":"system:masters","kind":"groups"},"code":403}`,
			wantAsked: []string{"impersonate / users:/jane", "impersonate / groups:/system:masters"}},
		{name: "service account refused", header: http.Header{"Impersonate-User": {"system:serviceaccount:kube-system:admin"}},
			wantErr:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"serviceaccounts \"admin\" is forbidden: User \"bob\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"kube-system\"","reason":"Forbidden","details":{"name":"admin","kind":"serviceaccounts"},"code":403}`,
			wantAsked: []string{"impersonate / serviceaccounts:kube-system/admin"}},
		{name: "extra refused", header: http.Header{"Impersonate-User": {"jane"}, "Impersonate-Extra-Scopes": {"write"}},
			wantErr:   `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"userextras.authentication.k8s.io \"write\" is forbidden: User \"bob\" cannot impersonate resource \"userextras/scopes\" in API group \"authentication.k8s.io\" at the cluster scope","reason":"Forbidden","details":{"name":"write","group":"authentication.k8s.io","kind":"userextras"},"code":403}`,
			wantAsked: []string{"impersonate / users:/jane", "impersonate authentication.k8s.io/v1 userextras/scopes:/write"}},
		{name: "group without user", header: http.Header{"Impersonate-Group": {"developers"}},
			wantErr: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Internal error occurred: requested [{Group  developers    }] without impersonating a user","reason":"InternalError","details":{"causes":[{"message":"requested [{Group  developers    }] without impersonating a user"}]},"code":500}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Every case sees each check reach authz.
			a.Flush()
			h := tt.header.Clone()
			u, err := impersonation.Impersonate(context.Background(), a, bob, h)
			if gotAsked := asked(); !slices.Equal(gotAsked, tt.wantAsked) {
				t.Errorf("checks %q, want %q", gotAsked, tt.wantAsked)
			}
			if tt.wantErr != "" {
				body, _ := json.Marshal(apistatus.Status(err))
				if string(body) != tt.wantErr {
					t.Fatalf("error\n%s\nwant\n%s", body, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if u != nil {
					t.Errorf("user %+v, want none", u)
				}
				return
			}
			if u == nil || u.Name != tt.want.Name || u.UID != tt.want.UID || !slices.Equal(u.Groups, tt.want.Groups) || len(u.Extra) != len(tt.want.Extra) ||
				(tt.want.Extra != nil && !slices.Equal(u.Extra["scopes"], tt.want.Extra["scopes"])) {
				t.Errorf("user %+v, want %+v", u, tt.want)
			}
			for name := range h {
				if len(name) > len("Impersonate-") && name[:len("Impersonate-")] == "Impersonate-" {
					t.Errorf("header %s left on the request", name)
				}
			}
		})
	}
}
