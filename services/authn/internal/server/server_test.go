package server

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var defaultAuds = []string{DefaultIssuer}

func TestStaticTokenReview(t *testing.T) {
	e := newEnv(t, false)
	start(t, e.options(), nil)
	tests := []struct {
		name      string
		token     string
		auds      []string
		want      authenticationv1.TokenReviewStatus
		wantError bool
	}{
		{name: "static token", token: staticToken, want: authenticationv1.TokenReviewStatus{Authenticated: true,
			User:      authenticationv1.UserInfo{Username: "alice", UID: "uid-alice", Groups: []string{"dev", "ops", "system:authenticated"}},
			Audiences: defaultAuds}},
		{name: "static token for another audience", token: staticToken, auds: []string{"vault"},
			want: authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}},
		{name: "unknown token", token: "nobody-knows-me", want: authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}},
		{name: "no token", token: "", wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reviewErr(e.nc, tt.token, tt.auds...)
			if tt.wantError {
				if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "token is required") {
					t.Fatalf("got %v, want 400 token is required", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got.Status); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServiceAccountTokenRoundTrip(t *testing.T) {
	e := newEnv(t, true)
	o := e.options()
	// No success cache, so a deletion shows on the next review.
	o.TokenCacheSuccessTTL = 0
	start(t, o, nil)
	ctx := context.Background()
	sa, err := e.api.Client.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: "team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := requestToken(e.nc, "team", "robot", string(sa.UID), &authenticationv1.TokenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tr.Spec.Audiences, defaultAuds) || *tr.Spec.ExpirationSeconds != 3600 {
		t.Errorf("defaults: audiences %q, expirationSeconds %d; want %q, 3600", tr.Spec.Audiences, *tr.Spec.ExpirationSeconds, defaultAuds)
	}
	if d := time.Until(tr.Status.ExpirationTimestamp.Time); d < 59*time.Minute || d > time.Hour {
		t.Errorf("expires in %v, want an hour", d)
	}

	got := review(t, e.nc, tr.Status.Token)
	if !got.Status.Authenticated {
		t.Fatalf("own token refused: %q", got.Status.Error)
	}
	u := got.Status.User
	wantGroups := []string{"system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"}
	if u.Username != "system:serviceaccount:team:robot" || u.UID != string(sa.UID) || !slices.Equal(u.Groups, wantGroups) {
		t.Errorf("user %+v, want the service account with groups %q", u, wantGroups)
	}
	if len(u.Extra["authentication.kubernetes.io/credential-id"]) != 1 {
		t.Errorf("no credential id in %v", u.Extra)
	}
	if !slices.Equal(got.Status.Audiences, defaultAuds) {
		t.Errorf("audiences %q, want %q", got.Status.Audiences, defaultAuds)
	}
	if got := review(t, e.nc, tr.Status.Token, "vault"); got.Status.Authenticated {
		t.Error("token accepted for an audience it was not issued for")
	}

	// A recreated service account has another uid: the old token is void.
	if err := e.api.Client.CoreV1().ServiceAccounts("team").Delete(ctx, "robot", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := review(t, e.nc, tr.Status.Token)
		if !got.Status.Authenticated {
			if !strings.Contains(got.Status.Error, "not found") {
				t.Errorf("error %q, want the service account not found", got.Status.Error)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("token of a deleted service account still accepted")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTokenRequest(t *testing.T) {
	e := newEnv(t, false)
	o := e.options()
	o.ServiceAccountMaxExpiration = 2 * time.Hour
	start(t, o, nil)
	tests := []struct {
		name    string
		req     authenticationv1.TokenRequest
		wantExp int64
		wantAud []string
		wantErr string // the whole message of an error reply
		code    int32
	}{
		{name: "defaults", wantExp: 3600, wantAud: defaultAuds},
		{name: "audiences and expiry kept", req: authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{"vault"}, ExpirationSeconds: ptr.To[int64](600)}}, wantExp: 600, wantAud: []string{"vault"}},
		{name: "capped at the maximum", req: authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](86400)}}, wantExp: 7200, wantAud: defaultAuds},
		{name: "under ten minutes", req: authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](599)}}, code: 422,
			wantErr: `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes`},
		{name: "over 2^32 seconds", req: authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](1<<32 + 1)}}, code: 422,
			wantErr: `TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid value: 4294967297: may not specify a duration larger than 2^32 seconds`},
		{name: "another name", req: authenticationv1.TokenRequest{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, code: 422,
			wantErr: `TokenRequest.authentication.k8s.io "robot" is invalid: metadata.name: Invalid value: "other": must match the service account name if specified`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := requestToken(e.nc, "team", "robot", "uid-1", &tt.req)
			if tt.wantErr != "" {
				var se apierrors.APIStatus
				if !asStatus(err, &se) || se.Status().Code != tt.code || err.Error() != tt.wantErr {
					t.Fatalf("got %v, want %d %q", err, tt.code, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got.Spec.ExpirationSeconds != tt.wantExp || !slices.Equal(got.Spec.Audiences, tt.wantAud) {
				t.Errorf("expirationSeconds %d audiences %q, want %d %q", *got.Spec.ExpirationSeconds, got.Spec.Audiences, tt.wantExp, tt.wantAud)
			}
			if got.Name != "robot" || got.Namespace != "team" || got.Kind != "TokenRequest" {
				t.Errorf("metadata %s/%s kind %q", got.Namespace, got.Name, got.Kind)
			}
		})
	}
}
