//go:build compose

package compose

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestCompose brings docker-compose.yml up, checks it with the kubectl
// suite and under faults, and takes it down.
func TestCompose(t *testing.T) {
	p := newProject(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("container logs:\n%s", p.logs())
		}
		// Down again in case a step failed before the last one.
		_, _ = p.try("down", "-v", "--remove-orphans", "--timeout", "5")
	})
	start := time.Now()
	p.run(t, "up", "-d")
	one := map[string]int{"etcd": 1, "nats": 1}
	for _, s := range services {
		one[s] = 1
	}
	p.waitHealthy(t, one, 5*time.Minute)
	t.Logf("FIGURE compose up to every service healthy: %v", time.Since(start).Round(time.Second))
	if _, err := os.Stat(p.Kubeconfig); err != nil {
		t.Fatalf("init wrote no admin kubeconfig: %v", err)
	}

	t.Run("kubectl suite", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^TestKubectl$", "./e2e")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "KPLANE_E2E_KUBECONFIG="+p.Kubeconfig)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the kubectl suite against compose failed: %v\n%s", err, out)
		}
		if !strings.Contains(string(out), "ok") {
			t.Fatalf("the kubectl suite ran nothing:\n%s", out)
		}
	})

	t.Run("faults under load", func(t *testing.T) { testFaults(t, p) })

	t.Run("down leaves nothing", func(t *testing.T) {
		if left := p.down(t); len(left) > 0 {
			t.Errorf("docker compose down -v left %v", left)
		}
	})
}
