package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"kplane.dev/deploy/launcher"
)

// launcherBinary is kplane-up's file name.
const launcherBinary = "kplane-up"

// built is the directory of the binaries this test binary built; it is
// package state because the point is to build once per test binary,
// across tests, and Main removes it.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// Main runs the tests of m and removes what they built.
func Main(m *testing.M) int {
	code := m.Run()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
	return code
}

// binaries returns a directory holding kplane-up and every service's
// binary, building them on first use.
func binaries() (string, error) {
	built.once.Do(func() {
		names := []string{launcherBinary}
		for _, s := range launcher.Services() {
			names = append(names, s.Binary)
		}
		if built.dir, built.err = os.MkdirTemp("", "kplane-e2e-bin-"); built.err != nil {
			built.err = fmt.Errorf("make build directory: %w", built.err)
			return
		}
		built.err = build(built.dir, names)
	})
	return built.dir, built.err
}

// build compiles the workspace's commands called names into dir, the way
// make binaries does (no -trimpath, so the build cache serves it).
func build(dir string, names []string) error {
	root, err := workspaceRoot()
	if err != nil {
		return err
	}
	mods, err := goOutput(root, "list", "-m", "-f", "{{.Dir}}")
	if err != nil {
		return err
	}
	args := []string{"list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`}
	for _, m := range strings.Fields(mods) {
		args = append(args, m+"/...")
	}
	mains, err := goOutput(root, args...)
	if err != nil {
		return err
	}
	var pkgs []string
	for _, p := range strings.Fields(mains) {
		if strings.Contains(p, "/cmd/") && slices.Contains(names, path.Base(p)) {
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) != len(names) {
		return fmt.Errorf("find commands %v in the workspace: found %v", names, pkgs)
	}
	_, err = goOutput(root, append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	return err
}

// workspaceRoot is the directory of the go.work this test runs in.
func workspaceRoot() (string, error) {
	work, err := goOutput("", "env", "GOWORK")
	if err != nil {
		return "", err
	}
	work = strings.TrimSpace(work)
	if work == "" || work == "off" {
		return "", fmt.Errorf("the end-to-end tests run inside the kplane workspace (go.work); GOWORK is %q", work)
	}
	return filepath.Dir(work), nil
}

func goOutput(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}
