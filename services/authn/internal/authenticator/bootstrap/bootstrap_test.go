package bootstrap_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/bootstrap"
)

// secrets is an in-memory SecretGetter: the lookup seam the service fills
// from its store.
type secrets map[string]*corev1.Secret

func (s secrets) GetSecret(_ context.Context, namespace, name string) (*corev1.Secret, error) {
	if name == "bootstrap-token-unread" {
		return nil, errors.New("store unavailable")
	}
	if sec, ok := s[namespace+"/"+name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func secret(id string, edit func(s *corev1.Secret)) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "bootstrap-token-" + id},
		Type:       "bootstrap.kubernetes.io/token",
		Data: map[string][]byte{
			"token-id":                       []byte(id),
			"token-secret":                   []byte("0123456789abcdef"),
			"usage-bootstrap-authentication": []byte("true"),
		},
	}
	if edit != nil {
		edit(s)
	}
	return s
}

func TestAuthenticate(t *testing.T) {
	deleting := metav1.NewTime(now)
	store := secrets{}
	for _, s := range []*corev1.Secret{
		secret("aaaaaa", nil),
		secret("groups", func(s *corev1.Secret) {
			s.Data["auth-extra-groups"] = []byte("system:bootstrappers:nodes,system:bootstrappers:a,system:bootstrappers:nodes")
		}),
		secret("badgrp", func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:bootstrappers:ok,system:masters") }),
		secret("expird", func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(-time.Second).Format(time.RFC3339)) }),
		secret("future", func(s *corev1.Secret) { s.Data["expiration"] = []byte(now.Add(time.Hour).Format(time.RFC3339)) }),
		secret("garbld", func(s *corev1.Secret) { s.Data["expiration"] = []byte("tomorrow") }),
		secret("nousag", func(s *corev1.Secret) { delete(s.Data, "usage-bootstrap-authentication") }),
		secret("falseu", func(s *corev1.Secret) { s.Data["usage-bootstrap-authentication"] = []byte("false") }),
		secret("badtyp", func(s *corev1.Secret) { s.Type = corev1.SecretTypeOpaque }),
		secret("wrngid", func(s *corev1.Secret) { s.Data["token-id"] = []byte("other1") }),
		secret("dlting", func(s *corev1.Secret) { s.DeletionTimestamp = &deleting }),
		secret("nodata", func(s *corev1.Secret) { s.Data = nil }),
	} {
		store[s.Namespace+"/"+s.Name] = s
	}
	other := secret("elsens", nil)
	other.Namespace = "default"
	store["default/"+other.Name] = other

	tests := []struct {
		name, token string
		wantGroups  []string // nil: refused (no opinion)
		wantErr     string
	}{
		{name: "valid", token: "aaaaaa.0123456789abcdef", wantGroups: []string{"system:bootstrappers"}},
		{name: "extra groups", token: "groups.0123456789abcdef", wantGroups: []string{"system:bootstrappers", "system:bootstrappers:a", "system:bootstrappers:nodes"}},
		{name: "not expired yet", token: "future.0123456789abcdef", wantGroups: []string{"system:bootstrappers"}},
		{name: "wrong secret", token: "aaaaaa.0123456789abcdeg"},
		{name: "group outside system:bootstrappers", token: "badgrp.0123456789abcdef"},
		{name: "expired", token: "expird.0123456789abcdef"},
		{name: "unparseable expiration", token: "garbld.0123456789abcdef"},
		{name: "usage missing", token: "nousag.0123456789abcdef"},
		{name: "usage false", token: "falseu.0123456789abcdef"},
		{name: "wrong type", token: "badtyp.0123456789abcdef"},
		{name: "token-id differs", token: "wrngid.0123456789abcdef"},
		{name: "being deleted", token: "dlting.0123456789abcdef"},
		{name: "no data", token: "nodata.0123456789abcdef"},
		{name: "not in kube-system", token: "elsens.0123456789abcdef"},
		{name: "no secret", token: "nosuch.0123456789abcdef"},
		{name: "upper case", token: "AAAAAA.0123456789abcdef"},
		{name: "short", token: "aaaaaa.0123456789abcde"},
		{name: "not a bootstrap token", token: "eyJhbGciOiJFUzI1NiJ9.e30.sig"},
		{name: "lookup failed", token: "unread.0123456789abcdef", wantErr: "get bootstrap token secret kube-system/bootstrap-token-unread: store unavailable"},
	}
	a := bootstrap.New(store, bootstrap.WithClock(clocktesting.NewFakePassiveClock(now)))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, ok, err := a.AuthenticateToken(context.Background(), tt.token)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if ok != (tt.wantGroups != nil) {
				t.Fatalf("ok = %v, want %v", ok, tt.wantGroups != nil)
			}
			if !ok {
				return
			}
			want := authenticator.UserInfo{Name: "system:bootstrap:" + tt.token[:6], Groups: tt.wantGroups}
			if diff := cmp.Diff(want, resp.User); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGroupsError(t *testing.T) {
	_, err := bootstrap.Groups(secret("x", func(s *corev1.Secret) { s.Data["auth-extra-groups"] = []byte("system:masters") }))
	want := `bootstrap group "system:masters" is invalid (must match \Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\z)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
}
