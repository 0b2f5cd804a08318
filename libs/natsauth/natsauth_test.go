package natsauth_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"

	"kplane.dev/libs/natsauth"
	"kplane.dev/proto/access"
)

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// users are the NKeys the configuration in files admits, by public key.
func users(t *testing.T, files natsauth.Files) map[string]bool {
	t.Helper()
	o, err := server.ProcessConfigFile(files.Config())
	if err != nil {
		t.Fatalf("load %s: %v", files.Config(), err)
	}
	keys := map[string]bool{}
	for _, u := range o.Nkeys {
		keys[u.Nkey] = true
	}
	return keys
}

// TestEnsureKeepsAndRotates checks that generating again keeps every key
// (a restart reconnects the services), that deleting a seed rotates that
// key alone and drops the old one from the configuration, and that every
// file is its owner's only.
func TestEnsureKeepsAndRotates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	files, err := natsauth.Ensure(dir, access.Services())
	if err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("directory mode %v, want 0700", m)
	}
	if m := mode(t, files.Config()); m != 0o600 {
		t.Errorf("configuration mode %v, want 0600", m)
	}
	first := users(t, files)
	if len(first) != len(access.Services()) {
		t.Fatalf("configuration admits %d users, want one per service (%d)", len(first), len(access.Services()))
	}
	seeds := map[string][]byte{}
	for _, s := range access.Services() {
		if m := mode(t, files.Seed(s.Name)); m != 0o600 {
			t.Errorf("seed of %s mode %v, want 0600", s.Name, m)
		}
		if seeds[s.Name], err = os.ReadFile(files.Seed(s.Name)); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := natsauth.Ensure(dir, access.Services()); err != nil {
		t.Fatal(err)
	}
	if again := users(t, files); !equal(first, again) {
		t.Errorf("generating again changed the users: %v, then %v", first, again)
	}

	if err := os.Remove(files.Seed(access.Gateway)); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.Ensure(dir, access.Services()); err != nil {
		t.Fatal(err)
	}
	rotated := users(t, files)
	kept := 0
	for k := range rotated {
		if first[k] {
			kept++
		}
	}
	if kept != len(first)-1 || len(rotated) != len(first) {
		t.Errorf("after deleting the gateway's seed %d of %d keys are kept, want all but one", kept, len(rotated))
	}
	for name, seed := range seeds {
		now, err := os.ReadFile(files.Seed(name))
		if err != nil {
			t.Fatal(err)
		}
		if (string(now) == string(seed)) == (name == access.Gateway) {
			t.Errorf("seed of %s changed: %v, want only the gateway's", name, string(now) != string(seed))
		}
	}
}

func equal(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// TestRenderResponderPublishesNothing guards the one subtle line of the
// configuration: a responder with nothing to publish must not get an
// empty allow list, which nats-server reads as no restriction.
func TestRenderResponderPublishesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, natsauth.ConfigFile)
	authn, _ := access.Lookup(access.Authn)
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, natsauth.Render([]access.Service{authn}, map[string]string{access.Authn: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	o, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	p := o.Nkeys[0].Permissions
	if p.Publish == nil || (p.Publish.Allow == nil && len(p.Publish.Deny) == 0) {
		t.Errorf("authn may publish anywhere: %+v", p.Publish)
	}
	if p.Response == nil || p.Response.MaxMsgs != access.ResponseMaxMsgs || p.Response.Expires != access.ResponseExpires {
		t.Errorf("responses = %+v, want %d messages within %v", p.Response, access.ResponseMaxMsgs, access.ResponseExpires)
	}
}
