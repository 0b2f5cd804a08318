//go:build compose

package compose

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// project is one docker-compose project of the root docker-compose.yml,
// named after the test run so that a user's own is never touched.
type project struct {
	name, file string
	env        []string
	// Kubeconfig is the admin kubeconfig init wrote.
	Kubeconfig string
	// compose is the Compose command: "docker compose" where the plugin
	// answers, else docker-compose.
	compose []string
}

// services are kplane's own services, each with a health check.
var services = []string{"core", "crd", "gateway", "authn", "authz", "admission"}

func newProject(t *testing.T) *project {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// The folder exists before compose mounts it, so it is the test's
	// and init hands the kubeconfig to the test's user.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	p := &project{
		name:       fmt.Sprintf("kplanetest%d", os.Getpid()),
		file:       filepath.Join(root, "docker-compose.yml"),
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		env: append(os.Environ(),
			"KPLANE_PORT="+strconv.Itoa(port),
			"KPLANE_KUBECONFIG_DIR="+dir,
		),
	}
	if tag := os.Getenv("KPLANE_TAG"); tag != "" {
		p.env = append(p.env, "KPLANE_TAG="+tag)
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		p.compose = []string{"docker", "compose"}
	} else {
		p.compose = []string{"docker-compose"}
	}
	return p
}

// run runs a Compose command on the project and returns its output.
func (p *project) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.try(args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(p.compose, " "), strings.Join(args, " "), err, out)
	}
	return out
}

func (p *project) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	full := append(slices.Clone(p.compose[1:]), append([]string{"-p", p.name, "-f", p.file}, args...)...)
	cmd := exec.CommandContext(ctx, p.compose[0], full...)
	cmd.Env = p.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// docker runs a docker command.
func docker(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// containers are the ids of the project's containers of service, all
// when all is set, else the running ones, in a stable order.
func (p *project) containers(t *testing.T, service string, all bool) []string {
	t.Helper()
	args := []string{"ps", "-q", "--no-trunc", "--filter", "label=com.docker.compose.project=" + p.name}
	if service != "" {
		args = append(args, "--filter", "label=com.docker.compose.service="+service)
	}
	if all {
		args = append(args, "-a")
	}
	ids := strings.Fields(docker(t, args...))
	slices.Sort(ids)
	return ids
}

// waitHealthy waits until service has want running containers, all
// healthy, and returns how long that took.
func (p *project) waitHealthy(t *testing.T, want map[string]int, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		var waiting []string
		for svc, n := range want {
			ids := p.containers(t, svc, false)
			healthy := 0
			for _, id := range ids {
				if out, err := exec.Command("docker", "inspect", "--format", "{{.State.Health.Status}}", id).Output(); err == nil && strings.TrimSpace(string(out)) == "healthy" {
					healthy++
				}
			}
			if len(ids) != n || healthy != n {
				waiting = append(waiting, fmt.Sprintf("%s %d/%d healthy of %d running", svc, healthy, n, len(ids)))
			}
		}
		if len(waiting) == 0 {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not healthy after %v: %s\n%s", timeout, strings.Join(waiting, "; "), p.logs())
		}
		time.Sleep(time.Second)
	}
}

// logs is the end of every container's log.
func (p *project) logs() string {
	out, _ := p.try("logs", "--no-color", "--tail", "40")
	return out
}

// down removes the project with its volumes and reports what is left.
//
// A network with no container on it that the engine still refuses to
// remove ("has active endpoints") is not reported: the engine kept an
// endpoint of a container it had already removed, after the faults'
// disconnect and reconnect (seen once in CI; `docker network disconnect
// -f` did not find the endpoint either). Nothing of the project is on
// such a network, so it is logged, not counted.
func (p *project) down(t *testing.T) []string {
	t.Helper()
	args := []string{"down", "-v", "--remove-orphans", "--timeout", "20"}
	out, err := p.try(args...)
	stale := err != nil && strings.Contains(out, "has active endpoints")
	if err != nil && !stale {
		t.Fatalf("%s %s: %v\n%s", strings.Join(p.compose, " "), strings.Join(args, " "), err, out)
	}
	var left []string
	label := "label=com.docker.compose.project=" + p.name
	for _, kind := range [][]string{{"ps", "-a", "-q"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
		ids := strings.Fields(docker(t, append(kind, "--filter", label)...))
		if stale && kind[0] == "network" {
			ids = slices.DeleteFunc(ids, func(id string) bool {
				if docker(t, "network", "inspect", "--format", "{{len .Containers}}", id) != "0" {
					return false
				}
				t.Logf("the engine kept network %s with no container on it: %s", id, out)
				return true
			})
		}
		if len(ids) > 0 {
			left = append(left, fmt.Sprintf("%s: %v", kind[0], ids))
		}
	}
	return left
}
