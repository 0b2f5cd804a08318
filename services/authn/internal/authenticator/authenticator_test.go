package authenticator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kplane.dev/services/authn/internal/authenticator"
)

func user(name string, groups ...string) *authenticator.Response {
	return &authenticator.Response{User: authenticator.UserInfo{Name: name, Groups: groups}}
}

func accepts(resp *authenticator.Response) authenticator.Authenticator {
	return authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
		return resp, true, nil
	})
}

func fails(msg string) authenticator.Authenticator {
	return authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
		return nil, false, errors.New(msg)
	})
}

var noOpinion = authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
	return nil, false, nil
})

func TestUnion(t *testing.T) {
	tests := []struct {
		name    string
		auth    authenticator.Authenticator
		want    *authenticator.Response
		wantErr string
	}{
		{name: "first success wins", auth: authenticator.Union(noOpinion, accepts(user("a")), accepts(user("b"))), want: user("a")},
		{name: "success after failures", auth: authenticator.Union(fails("x"), noOpinion, accepts(user("b"))), want: user("b")},
		{name: "no opinion", auth: authenticator.Union(noOpinion, noOpinion)},
		{name: "none", auth: authenticator.Union()},
		{name: "one failure", auth: authenticator.Union(noOpinion, fails("token has expired")), wantErr: "token has expired"},
		{name: "failures aggregated", auth: authenticator.Union(fails("x"), noOpinion, fails("y"), fails("x")), wantErr: "[x, y]"},
		{name: "fail on error stops", auth: authenticator.UnionFailOnError(fails("x"), accepts(user("b"))), wantErr: "x"},
		{name: "fail on error passes no opinion", auth: authenticator.UnionFailOnError(noOpinion, accepts(user("b"))), want: user("b")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, tt.auth, "tok", tt.want, tt.wantErr)
		})
	}
}

func check(t *testing.T, a authenticator.Authenticator, token string, want *authenticator.Response, wantErr string) {
	t.Helper()
	resp, ok, err := a.AuthenticateToken(context.Background(), token)
	if wantErr != "" {
		if err == nil || err.Error() != wantErr || ok {
			t.Fatalf("got ok=%v err=%v, want error %q", ok, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	if ok != (want != nil) {
		t.Fatalf("ok = %v, want %v", ok, want != nil)
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestAuthenticatedGroupAdder(t *testing.T) {
	shared := user("alice", "dev")
	tests := []struct {
		name string
		in   *authenticator.Response
		want *authenticator.Response
	}{
		{name: "added", in: shared, want: user("alice", "dev", "system:authenticated")},
		{name: "no groups", in: user("bob"), want: user("bob", "system:authenticated")},
		{name: "already there", in: user("carol", "system:authenticated", "x"), want: user("carol", "system:authenticated", "x")},
		{name: "unauthenticated kept", in: user("dan", "system:unauthenticated"), want: user("dan", "system:unauthenticated")},
		{name: "anonymous", in: user("system:anonymous"), want: user("system:anonymous")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, authenticator.AuthenticatedGroupAdder(accepts(tt.in)), "tok", tt.want, "")
		})
	}
	if diff := cmp.Diff(user("alice", "dev"), shared); diff != "" {
		t.Errorf("adder changed the wrapped response (-want +got):\n%s", diff)
	}
	check(t, authenticator.AuthenticatedGroupAdder(fails("x")), "tok", nil, "x")
	check(t, authenticator.AuthenticatedGroupAdder(noOpinion), "tok", nil, "")
}

func TestBearer(t *testing.T) {
	tokens := authenticator.Func(func(_ context.Context, token string) (*authenticator.Response, bool, error) {
		switch token {
		case "good":
			return user("alice"), true, nil
		case "expired":
			return nil, false, errors.New("service account token has expired")
		}
		return nil, false, nil
	})
	anonymous := user("system:anonymous", "system:unauthenticated")
	tests := []struct {
		name      string
		anonymous bool
		token     string
		want      *authenticator.Response
		wantErr   string
	}{
		{name: "valid", token: "good", want: user("alice", "system:authenticated")},
		{name: "valid, anonymous on", anonymous: true, token: "good", want: user("alice", "system:authenticated")},
		{name: "unknown token", token: "nope", wantErr: "invalid bearer token"},
		{name: "unknown token is not anonymous", anonymous: true, token: "nope", wantErr: "invalid bearer token"},
		{name: "refused token is not anonymous", anonymous: true, token: "expired", wantErr: "service account token has expired"},
		{name: "no token, anonymous on", anonymous: true, token: "", want: anonymous},
		{name: "no token, anonymous off", token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			check(t, authenticator.Bearer(tokens, tt.anonymous), tt.token, tt.want, tt.wantErr)
		})
	}
}

func TestAudiencesIntersect(t *testing.T) {
	got := authenticator.Audiences{"a", "b", "c"}.Intersect(authenticator.Audiences{"c", "a", "z"})
	if diff := cmp.Diff(authenticator.Audiences{"a", "c"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := (authenticator.Audiences{"a"}).Intersect(nil); got != nil {
		t.Errorf("with none: %v", got)
	}
}
