package authenticator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kplane.dev/services/authn/internal/authenticator"
)

func TestAudienceAgnostic(t *testing.T) {
	implicit := authenticator.Audiences{"api", "api2"}
	alice := authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: authenticator.UserInfo{Name: "alice"}}, true, nil
	})
	aware := authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
		return &authenticator.Response{User: authenticator.UserInfo{Name: "alice"}, Audiences: authenticator.Audiences{"x"}}, true, nil
	})
	failing := authenticator.Func(func(context.Context, string) (*authenticator.Response, bool, error) {
		return nil, false, errors.New("bad token")
	})
	tests := []struct {
		name     string
		next     authenticator.Authenticator
		target   authenticator.Audiences // nil: none asked
		wantOK   bool
		wantErr  bool
		wantAuds authenticator.Audiences
	}{
		{name: "no audiences asked", next: alice, wantOK: true},
		{name: "implicit audience asked", next: alice, target: authenticator.Audiences{"other", "api2"}, wantOK: true, wantAuds: authenticator.Audiences{"api2"}},
		{name: "foreign audience is no opinion", next: alice, target: authenticator.Audiences{"vault"}},
		{name: "error passes", next: failing, target: implicit, wantErr: true},
		{name: "audience-aware authenticator is a bug", next: aware, target: implicit, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			if tt.target != nil {
				ctx = authenticator.WithAudiences(ctx, tt.target)
			}
			resp, ok, err := authenticator.AudienceAgnostic(implicit, tt.next).AuthenticateToken(ctx, "t")
			if (err != nil) != tt.wantErr || ok != tt.wantOK {
				t.Fatalf("got ok=%v err=%v, want ok=%v err=%v", ok, err, tt.wantOK, tt.wantErr)
			}
			if ok && !cmp.Equal(tt.wantAuds, resp.Audiences) {
				t.Errorf("audiences %q, want %q", resp.Audiences, tt.wantAuds)
			}
		})
	}
}
