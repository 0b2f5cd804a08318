package launcher

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// TestNATSAuth checks that an installation gets a NATS key for each of its
// services and a configuration admitting them, and that the token all
// services shared before is gone.
func TestNATSAuth(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, oldNATSToken)
	if err := os.WriteFile(old, []byte("shared\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	files, err := NATSAuth(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old shared token is still there: %v", err)
	}
	for _, s := range Services() {
		if _, err := os.Stat(files.Seed(s.Name)); err != nil {
			t.Errorf("no NATS key for %s: %v", s.Name, err)
		}
	}
	o, err := server.ProcessConfigFile(files.Config())
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Nkeys) < len(Services()) {
		t.Errorf("the configuration admits %d users, want one per service", len(o.Nkeys))
	}
}
