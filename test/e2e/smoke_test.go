package e2e

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"kplane.dev/test/e2e/harness"
)

// TestSmoke is a newcomer's first minutes: kubectl against a fresh
// installation.
func TestSmoke(t *testing.T) {
	sys := harness.Start(t)

	t.Run("get ns lists the system namespaces", func(t *testing.T) {
		out, errOut, err := sys.Kubectl(t, "get", "ns", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl get ns: %v\n%s", err, errOut)
		}
		got := strings.Fields(out)
		for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
			if !slices.Contains(got, "namespace/"+ns) {
				t.Errorf("kubectl get ns: no %s in %q", ns, got)
			}
		}
	})
	t.Run("version reaches the server", func(t *testing.T) {
		out, errOut, err := sys.Kubectl(t, "version", "-o", "json")
		if err != nil {
			t.Fatalf("kubectl version: %v\n%s", err, errOut)
		}
		if !strings.Contains(out, `"serverVersion"`) {
			t.Errorf("kubectl version printed no server version:\n%s", out)
		}
	})
	t.Run("the gateway logs each request", func(t *testing.T) {
		if _, errOut, err := sys.Kubectl(t, "get", "configmaps", "-n", "kube-public", "--request-timeout=17s"); err != nil {
			t.Fatalf("kubectl get configmaps: %v\n%s", err, errOut)
		}
		// The line is written once the answer is done, which may be after
		// kubectl has read it.
		mustEventually(t, 10*time.Second, "an access log line", func(context.Context) error {
			for _, line := range strings.Split(sys.Log(t, "gateway"), "\n") {
				if strings.Contains(line, `msg=HTTP verb=GET uri="/api/v1/namespaces/kube-public/configmaps?`) && strings.Contains(line, "timeout=17s") &&
					strings.Contains(line, "user=kplane-admin code=200 ") && strings.Contains(line, `user_agent="kubectl/`) {
					return nil
				}
			}
			return errors.New("no line for kubectl's list of configmaps in the gateway's log")
		})
	})
	t.Run("api-resources lists configmaps", func(t *testing.T) {
		out, errOut, err := sys.Kubectl(t, "api-resources", "--api-group=", "-o", "name")
		if err != nil {
			t.Fatalf("kubectl api-resources: %v\n%s", err, errOut)
		}
		if !slices.Contains(strings.Fields(out), "configmaps") {
			t.Errorf("kubectl api-resources: no configmaps in\n%s", out)
		}
	})
}
