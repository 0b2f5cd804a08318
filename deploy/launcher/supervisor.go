package launcher

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// RestartPolicy says how a service that exits on its own is restarted.
type RestartPolicy struct {
	// Backoff is the first wait before a restart; it doubles after each
	// exit up to MaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Healthy is how long a process must run for its exit not to count
	// as a failure in a row.
	Healthy time.Duration
	// MaxFailures is how many failures in a row are restarted; the next
	// one stops the installation.
	MaxFailures int
}

// supervisor runs one service process at a time and restarts it.
type supervisor struct {
	name string
	path string
	args []string
	// env is the process's environment; nil is kplane-up's own.
	env     []string
	logPath string
	// pidPath holds the pid of the running process once it is ready, and
	// is removed when it exits: what `make down` and tests read.
	pidPath string
	probe   *prober
	grace   time.Duration
	policy  RestartPolicy
	log     *slog.Logger

	readyOnce sync.Once
	// ready is closed when the first process passes its readiness probe.
	ready chan struct{}
}

// run keeps the service running until ctx ends, then stops it: SIGTERM,
// then SIGKILL after the grace period. It returns an error only when it
// gives up on a service that keeps failing.
func (s *supervisor) run(ctx context.Context) error {
	failures := 0
	backoff := s.policy.Backoff
	for {
		started := time.Now()
		err := s.runOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		ran := time.Since(started)
		if ran >= s.policy.Healthy {
			failures, backoff = 0, s.policy.Backoff
		}
		failures++
		s.log.Warn("service exited", "service", s.name, "err", err, "ran", ran.Round(time.Millisecond), "log", s.logPath)
		if failures > s.policy.MaxFailures {
			return fmt.Errorf("%s failed %d times in a row, last: %w (see %s)", s.name, failures, err, s.logPath)
		}
		s.log.Info("restarting service", "service", s.name, "after", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.policy.MaxBackoff)
	}
}

// errExitedCleanly is the exit of a process that nobody asked to stop.
var errExitedCleanly = errors.New("exited with status 0")

// runOnce runs one process until it exits or ctx ends.
func (s *supervisor) runOnce(ctx context.Context) error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = logf.Close() }()
	// A log made by an earlier version may be open to others.
	if err := logf.Chmod(0o600); err != nil {
		return fmt.Errorf("restrict log: %w", err)
	}
	fmt.Fprintf(logf, "==== kplane-up: starting %s at %s: %s %q\n", s.name, time.Now().Format(time.RFC3339), s.path, s.args)

	cmd := exec.Command(s.path, s.args...)
	cmd.Env = s.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttributes()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.path, err)
	}
	s.log.Info("service started", "service", s.name, "pid", cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	probeCtx, cancelProbe := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		if err := s.probe.wait(probeCtx); err != nil {
			return
		}
		if err := os.WriteFile(s.pidPath, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
			s.log.Error("write pid file", "service", s.name, "err", err)
		}
		s.log.Info("service ready", "service", s.name, "pid", cmd.Process.Pid)
		s.readyOnce.Do(func() { close(s.ready) })
	}()
	defer func() {
		cancelProbe()
		<-probed
		_ = os.Remove(s.pidPath)
	}()

	select {
	case err := <-exited:
		if err == nil {
			return errExitedCleanly
		}
		return err
	case <-ctx.Done():
		return stop(cmd, exited, s.grace)
	}
}

// stop ends cmd: SIGTERM, and SIGKILL if it is still running after grace.
func stop(cmd *exec.Cmd, exited <-chan error, grace time.Duration) error {
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return <-exited
	}
	select {
	case err := <-exited:
		return err
	case <-time.After(grace):
	}
	_ = cmd.Process.Kill()
	<-exited
	return fmt.Errorf("killed after %v", grace)
}

// prober polls a service's /readyz.
type prober struct {
	url      string
	client   *http.Client
	interval time.Duration
}

func newProber(port int, tlsConfig *tls.Config, interval time.Duration) *prober {
	return &prober{
		url:      "https://127.0.0.1:" + strconv.Itoa(port) + "/readyz",
		client:   &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}},
		interval: interval,
	}
}

// wait returns nil once /readyz answers 200, or ctx's error.
func (p *prober) wait(ctx context.Context) error {
	defer p.client.CloseIdleConnections()
	t := time.NewTicker(p.interval)
	defer t.Stop()
	for {
		if p.ready(ctx) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (p *prober) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return false
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// privateFile makes path, if missing, a file only its owner may read, and
// restricts it if it exists: for the logs of servers that create theirs
// open to others.
func privateFile(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return fmt.Errorf("restrict %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}
