package regopolicy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	protect = "package kplane.test.protect\ndeny contains \"protected\" if input.name == \"prod\"\n"
	pods    = "package kplane.test.protect\ndeny contains \"pods are off\" if input.resource == \"pods\"\n"
)

// denies evaluates the set in force.
func denies(t *testing.T, e *Engine, input map[string]any) []string {
	t.Helper()
	res, err := e.Current().Eval(context.Background(), input)
	if err != nil {
		t.Fatal(err)
	}
	return res.Messages("deny")
}

func writeFile(t *testing.T, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestDirSync edits a policy directory between syncs: a new file takes
// effect, a broken edit keeps the last good set, the fix takes effect,
// and removing the file lifts the policy.
func TestDirSync(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e := newEngine(t)
	d := NewDir(e, dir, nil)
	if err := d.Load(ctx); err != nil {
		t.Fatal(err)
	}
	prod := map[string]any{"name": "prod"}
	pod := map[string]any{"name": "p", "resource": "pods"}
	sync := func(what string, wantChanged, wantErr bool) {
		t.Helper()
		changed, err := d.Sync(ctx)
		if changed != wantChanged || (err != nil) != wantErr {
			t.Fatalf("%s: sync changed %v, error %v; want changed %v, an error %v", what, changed, err, wantChanged, wantErr)
		}
	}
	file := filepath.Join(dir, "protect.rego")

	sync("unchanged empty directory", false, false)
	writeFile(t, filepath.Join(dir, "notes.txt"), "not a policy")
	sync("a file that is not a policy", false, false)

	writeFile(t, file, protect)
	sync("policy added", true, false)
	if got := denies(t, e, prod); !slices.Equal(got, []string{"protected"}) {
		t.Fatalf("policy added: deny %q", got)
	}
	sync("unchanged policy", false, false)

	writeFile(t, file, protect+"deny contains \"broken\" if {")
	sync("broken edit", true, true)
	if got := denies(t, e, prod); !slices.Equal(got, []string{"protected"}) {
		t.Errorf("broken edit: deny %q, want the last good set's", got)
	}
	if got := denies(t, e, pod); got != nil {
		t.Errorf("broken edit denies more: %q", got)
	}
	sync("broken file unchanged", false, false)

	writeFile(t, file, protect+"deny contains \"pods are off\" if input.resource == \"pods\"\n")
	sync("fixed edit", true, false)
	if got := denies(t, e, pod); !slices.Equal(got, []string{"pods are off"}) {
		t.Errorf("fixed edit: deny %q", got)
	}

	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	sync("file removed", true, false)
	if got := denies(t, e, prod); got != nil {
		t.Errorf("file removed: deny %q", got)
	}

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	sync("directory removed", false, true)
}

// TestDirRun reloads a running watcher's directory, observed through the
// engine's change callback.
func TestDirRun(t *testing.T) {
	dir := t.TempDir()
	changes := make(chan string, 10)
	e := newEngine(t, WithOnChange(func(s string) { changes <- s }))
	d := NewDir(e, dir, nil)
	if err := d.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx, 5*time.Millisecond) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	writeFile(t, filepath.Join(dir, "pods.rego"), pods)
	select {
	case s := <-changes:
		if s != DirSource {
			t.Errorf("change of source %q, want %q", s, DirSource)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new file was not loaded")
	}
	if got := denies(t, e, map[string]any{"resource": "pods"}); !slices.Equal(got, []string{"pods are off"}) {
		t.Errorf("deny %q after the reload", got)
	}
}

// TestDirLoad fails the start on a directory whose policies do not
// compile, or that is missing, and names modules after their files.
func TestDirLoad(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "bad.rego"), "package kplane.test.bad\ndeny contains if")
	if err := NewDir(newEngine(t), dir, nil).Load(context.Background()); err == nil || !strings.Contains(err.Error(), "dir/bad.rego") {
		t.Fatalf("load error %v, want one naming dir/bad.rego", err)
	}
	if err := NewDir(newEngine(t), filepath.Join(dir, "missing"), nil).Load(context.Background()); err == nil {
		t.Fatal("a missing directory loaded")
	}
}
