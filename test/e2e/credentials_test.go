package e2e

import (
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"kplane.dev/deploy/launcher"
	"kplane.dev/libs/natsauth"
	"kplane.dev/proto/access"
	"kplane.dev/proto/authn"
	"kplane.dev/proto/authz"
	"kplane.dev/test/e2e/harness"
)

// TestCredentials attacks the NATS server of a system started as make up
// starts it, with one service's key and with none; then it issues
// credentials through a run of the system (each service's NATS key, a
// service account token used against the API, the admin's client key, the
// service account signing key) and looks for each of them in every
// process's command line and, after the run, in every log file, which only
// their owner may read.
func TestCredentials(t *testing.T) {
	sys := harness.Start(t)
	t.Run("NATS admits each service only to its own subjects", func(t *testing.T) { testNATSPermissions(t, sys) })
	const ns = "e2e-credentials"
	createNamespace(t, sys, ns)
	mustKubectl(t, sys, "-n", ns, "create", "serviceaccount", "robot")
	token := strings.TrimSpace(mustKubectl(t, sys, "-n", ns, "create", "token", "robot"))
	if _, errOut, err := sys.KubectlToken(t, token, "auth", "whoami"); err != nil {
		t.Fatalf("kubectl auth whoami with the token: %v\n%s", err, errOut)
	}
	if _, _, err := sys.KubectlToken(t, token, "-n", ns, "get", "secrets"); err == nil {
		t.Fatal("the robot lists secrets without a grant")
	}
	mustKubectl(t, sys, "-n", ns, "create", "secret", "generic", "s", "--from-literal=password=e2e-secret-value-1234")

	secrets := map[string]string{
		"service account token":           token,
		"service account token signature": token[strings.LastIndex(token, ".")+1:],
		"secret value":                    "e2e-secret-value-1234",
	}
	seeds, err := filepath.Glob(filepath.Join(sys.DataDir, launcher.NATSAuthDir, "*.nk"))
	if err != nil || len(seeds) == 0 {
		t.Fatalf("no NATS seeds under %s: %v", launcher.NATSAuthDir, err)
	}
	for _, f := range seeds {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		secrets["NATS seed "+filepath.Base(f)] = strings.TrimSpace(string(b))
	}
	for _, key := range []string{"admin.key", "sa.key"} {
		b, err := os.ReadFile(filepath.Join(sys.DataDir, "pki", key))
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("%s holds no PEM block", key)
		}
		// Each line of the key's PEM body, as a log or a flag would carry
		// it.
		body := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i, line := range body[1 : len(body)-1] {
			secrets[key+" line "+strconv.Itoa(i+1)] = line
		}
	}

	pids := map[string]int{}
	if b, err := os.ReadFile(filepath.Join(sys.DataDir, "kplane-up.pid")); err == nil {
		pids["kplane-up"], _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	for _, s := range launcher.Services() {
		pids[s.Name] = sys.PID(t, s.Name)
	}
	for name, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil {
			t.Fatalf("command line of %s: %v", name, err)
		}
		args := strings.ReplaceAll(string(b), "\x00", " ")
		for what, secret := range secrets {
			if strings.Contains(args, secret) {
				t.Errorf("the command line of %s holds the %s", name, what)
			}
		}
		if strings.Contains(args, "--nats-token=") {
			t.Errorf("the command line of %s holds a NATS token: %s", name, args)
		}
	}

	sys.Stop(t) // the shutdown's lines are logged too
	logs := 0
	err = filepath.WalkDir(sys.DataDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		logs++
		info, err := d.Info()
		if err != nil {
			return err
		}
		if m := info.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, m)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for what, secret := range secrets {
			if strings.Contains(string(b), secret) {
				t.Errorf("%s holds the %s", path, what)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(launcher.Services()) + 2; logs < want { // and etcd's and NATS's
		t.Errorf("found %d log files, want at least %d", logs, want)
	}

	t.Run("deleting a seed and starting again rotates that key", func(t *testing.T) { testRotateNATSKey(t, sys) })
}

// testRotateNATSKey deletes the gateway's NATS seed of a stopped system and
// starts it again: the gateway works with a new key, and the old one is
// refused.
func testRotateNATSKey(t *testing.T, sys *harness.System) {
	files := natsauth.Files{Dir: filepath.Join(sys.DataDir, launcher.NATSAuthDir)}
	old := filepath.Join(t.TempDir(), "old.nk")
	if err := os.Rename(files.Seed(access.Gateway), old); err != nil {
		t.Fatal(err)
	}
	sys.Relaunch(t)
	// The token request goes from core to authn over NATS, its review
	// from the gateway to authn.
	token := strings.TrimSpace(mustKubectl(t, sys, "-n", "e2e-credentials", "create", "token", "robot"))
	if _, errOut, err := sys.KubectlToken(t, token, "auth", "whoami"); err != nil {
		t.Errorf("kubectl auth whoami with a token after the rotation: %v\n%s", err, errOut)
	}
	b, err := os.ReadFile(files.Seed(access.Gateway))
	if err != nil {
		t.Fatalf("no new seed: %v", err)
	}
	ob, err := os.ReadFile(old)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == string(ob) {
		t.Fatal("the gateway's seed is the same after the rotation")
	}
	key, err := nats.NkeyOptionFromSeed(old)
	if err != nil {
		t.Fatal(err)
	}
	if nc, err := nats.Connect("nats://127.0.0.1:"+strconv.Itoa(sys.Ports["nats"]), key); err == nil {
		nc.Close()
		t.Error("NATS admits the gateway's old key")
	}
}

// testNATSPermissions connects to the launcher's NATS as the gateway and
// tries to read or answer the reviews of authn and authz; and without a
// key at all.
func testNATSPermissions(t *testing.T, sys *harness.System) {
	url := "nats://127.0.0.1:" + strconv.Itoa(sys.Ports["nats"])
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Error("NATS admits a client without credentials")
	}
	files := natsauth.Files{Dir: filepath.Join(sys.DataDir, launcher.NATSAuthDir)}
	for _, try := range []struct{ subject, queue string }{
		{"kplane.authz.>", ""},
		{"kplane.authn.>", ""},
		{authz.SubjectAccessReview, authz.QueueGroup},
		{authn.SubjectTokenReview, authn.QueueGroup},
		{"_INBOX_core.>", ""},
	} {
		t.Run(try.subject+" "+try.queue, func(t *testing.T) {
			key, err := nats.NkeyOptionFromSeed(files.Seed(access.Gateway))
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(url, key, nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
			if err != nil {
				t.Fatalf("connect with the gateway's key: %v", err)
			}
			defer nc.Close()
			if _, err := nc.QueueSubscribeSync(try.subject, try.queue); err != nil {
				t.Fatal(err)
			}
			// The server reports a violation before the pong that ends
			// the flush.
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if err := nc.LastError(); !errors.Is(err, nats.ErrPermissionViolation) {
				t.Errorf("subscribing with the gateway's key: error %v, want a permissions violation", err)
			}
		})
	}
}
