package tokenfile_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kplane.dev/services/authn/internal/authenticator"
	"kplane.dev/services/authn/internal/authenticator/tokenfile"
)

func TestParse(t *testing.T) {
	const file = `token1,user1,uid1
token2,user2,uid2
token3,user3,uid3,"group1,group2"
token4,user4,uid4,"group2"
token5,user5,uid5,group5
token6,user6,uid6,group5,otherdata
token7,user7,uid7,"group1,group2",otherdata
`
	a, err := tokenfile.Parse(strings.NewReader(file), "tokens.csv", discard())
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	tests := []struct {
		token string
		want  *authenticator.UserInfo
	}{
		{token: "token1", want: &authenticator.UserInfo{Name: "user1", UID: "uid1"}},
		{token: "token2", want: &authenticator.UserInfo{Name: "user2", UID: "uid2"}},
		{token: "token3", want: &authenticator.UserInfo{Name: "user3", UID: "uid3", Groups: []string{"group1", "group2"}}},
		{token: "token4", want: &authenticator.UserInfo{Name: "user4", UID: "uid4", Groups: []string{"group2"}}},
		{token: "token5", want: &authenticator.UserInfo{Name: "user5", UID: "uid5", Groups: []string{"group5"}}},
		{token: "token6", want: &authenticator.UserInfo{Name: "user6", UID: "uid6", Groups: []string{"group5"}}},
		{token: "token7", want: &authenticator.UserInfo{Name: "user7", UID: "uid7", Groups: []string{"group1", "group2"}}},
		{token: "token8"},
		{token: ""},
	}
	for _, tt := range tests {
		t.Run(tt.token, func(t *testing.T) {
			resp, ok, err := a.AuthenticateToken(context.Background(), tt.token)
			if err != nil {
				t.Fatalf("authenticate: %v", err)
			}
			if ok != (tt.want != nil) {
				t.Fatalf("ok = %v, want %v", ok, tt.want != nil)
			}
			if tt.want == nil {
				return
			}
			if diff := cmp.Diff(*tt.want, resp.User); diff != "" {
				t.Errorf("user (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, file, wantErr string
	}{
		{
			name:    "two columns",
			file:    "token1,user1\n",
			wantErr: "token file 'tokens.csv' must have at least 3 columns (token, user name, user uid), found 2",
		},
		{
			name:    "bad quoting",
			file:    "token1,user1,uid1,\"group1\n",
			wantErr: `parse error on line 1, column 27: extraneous or missing " in quoted-field`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tokenfile.Parse(strings.NewReader(tt.file), "tokens.csv", discard())
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// An empty token and a duplicate are accepted with warnings that never
// contain a token.
func TestWarningsNeverNameTheToken(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	a, err := tokenfile.Parse(strings.NewReader(",user0,uid0\nsecret-tok,user1,uid1\nsecret-tok,user2,uid2\n"), "tokens.csv", log)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	resp, ok, err := a.AuthenticateToken(context.Background(), "secret-tok")
	if err != nil || !ok || resp.User.Name != "user2" {
		t.Fatalf("duplicate token: got %+v, %v, %v; want user2 (the last record)", resp, ok, err)
	}
	if got := strings.Count(logs.String(), "level=WARN"); got != 2 {
		t.Errorf("warnings = %d, want 2:\n%s", got, logs.String())
	}
	if strings.Contains(logs.String(), "secret-tok") {
		t.Errorf("log names a token:\n%s", logs.String())
	}
}

func TestNewCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.csv")
	if err := os.WriteFile(path, []byte("abc,alice,1,\"system:masters\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := tokenfile.NewCSV(path, discard())
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	resp, ok, err := a.AuthenticateToken(context.Background(), "abc")
	if err != nil || !ok || resp.User.Name != "alice" {
		t.Fatalf("got %+v, %v, %v", resp, ok, err)
	}
	if _, err := tokenfile.NewCSV(filepath.Join(t.TempDir(), "missing.csv"), discard()); err == nil {
		t.Fatal("missing file: no error")
	}
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// A TokenReview of a static token: bearer handling and the group adder around
// a file of 10,000 tokens.
func BenchmarkTokenReviewStatic(b *testing.B) {
	var file strings.Builder
	for i := range 10000 {
		fmt.Fprintf(&file, "token-%d,user-%d,uid-%d,\"group-a,group-b\"\n", i, i, i)
	}
	a, err := tokenfile.Parse(strings.NewReader(file.String()), "tokens.csv", discard())
	if err != nil {
		b.Fatal(err)
	}
	chain := authenticator.Bearer(a, true)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, err := chain.AuthenticateToken(ctx, "token-5000"); !ok || err != nil {
			b.Fatalf("ok=%v err=%v", ok, err)
		}
	}
}
