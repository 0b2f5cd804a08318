package launcher

import (
	"context"
	"crypto/tls"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testSupervisor(t *testing.T, script string, policy RestartPolicy) *supervisor {
	t.Helper()
	dir := t.TempDir()
	return &supervisor{
		name:    "svc",
		path:    "/bin/sh",
		args:    []string{"-c", script},
		logPath: filepath.Join(dir, "svc.log"),
		pidPath: filepath.Join(dir, "svc.pid"),
		// Nothing listens on port 1: the probe never passes.
		probe:  newProber(1, &tls.Config{MinVersion: tls.VersionTLS12}, 10*time.Millisecond),
		grace:  10 * time.Second,
		policy: policy,
		log:    slog.New(slog.DiscardHandler),
		ready:  make(chan struct{}),
	}
}

func TestSupervisorGivesUpOnACrashLoop(t *testing.T) {
	s := testSupervisor(t, "echo boom; exit 3", RestartPolicy{Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Healthy: time.Hour, MaxFailures: 2})
	err := s.run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "svc failed 3 times in a row") || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("run = %v, want it to give up after 3 failures with the exit status", err)
	}
	log, err := os.ReadFile(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(log), "\nboom\n"); n != 3 {
		t.Errorf("log holds %d runs, want 3:\n%s", n, log)
	}
}

func TestSupervisorStopsItsProcessWhenCancelled(t *testing.T) {
	s := testSupervisor(t, "echo up; exec sleep 600", RestartPolicy{Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Healthy: time.Hour, MaxFailures: 0})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	waitForLog(t, s.logPath, "up\n")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v after cancel, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run still running 30s after cancel: SIGTERM did not stop sleep")
	}
}

// TestSupervisorSetsTheEnvironment: a process runs with the supervisor's
// environment when it has one.
func TestSupervisorSetsTheEnvironment(t *testing.T) {
	s := testSupervisor(t, `echo "procs=$GOMAXPROCS"; exec sleep 600`, RestartPolicy{Backoff: time.Millisecond, MaxBackoff: time.Millisecond, Healthy: time.Hour, MaxFailures: 0})
	s.env = append(os.Environ(), "GOMAXPROCS=1", "GOMAXPROCS=3")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v after cancel, want nil", err)
		}
	}()
	if log := waitForLog(t, s.logPath, "procs="); !strings.Contains(log, "procs=3\n") {
		t.Fatalf("the process saw %q, want procs=3", log)
	}
}

// waitForLog waits up to 30 s for the log at path to hold text and
// returns the log.
func waitForLog(t *testing.T, path, text string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), text) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not start: its log holds no %q", text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
