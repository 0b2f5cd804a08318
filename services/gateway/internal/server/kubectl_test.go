package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kubectlPath is the stock kubectl of the machine.
const kubectlPath = "/usr/bin/kubectl"

// TestKubectl runs the stock kubectl against a gateway with an admin
// kubeconfig: what a user first types must work unchanged.
func TestKubectl(t *testing.T) {
	if _, err := os.Stat(kubectlPath); err != nil {
		t.Skipf("no kubectl: %v", err)
	}
	in := start(t, 1, nil)
	admin := in.certs.dir.Files("client-alice")
	kubeconfig := filepath.Join(t.TempDir(), "admin.kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: kplane
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: admin@kplane
  context: {cluster: kplane, user: admin}
current-context: admin@kplane
`, in.gw.URL, in.certs.caFile(), admin.Cert, admin.Key)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"get", "ns"}, []string{"NAME", "STATUS", "AGE", "default", "kube-system", "kube-public", "kube-node-lease", "Active"}},
		{[]string{"api-resources"}, []string{"configmaps", "namespaces", "apiservices", "apiregistration.k8s.io/v1", "clusterroles"}},
		{[]string{"api-versions"}, []string{"v1\n", "rbac.authorization.k8s.io/v1", "coordination.k8s.io/v1"}},
		{[]string{"version", "-o", "json"}, []string{`"serverVersion"`, `"gitVersion": "v1.37`}},
		{[]string{"get", "--raw", "/readyz?verbose"}, []string{"[+]poststarthook/apiservice-registration-controller ok", "readyz check passed"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			cmd := exec.Command(kubectlPath, append([]string{"--kubeconfig=" + kubeconfig}, tt.args...)...)
			cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECACHEDIR="+t.TempDir())
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(tt.args, " "), err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
