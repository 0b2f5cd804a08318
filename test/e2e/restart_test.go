package e2e

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// TestRestartsKeepData restarts each service process under the launcher,
// then the launcher itself, and reads back through the gateway what was
// written before.
func TestRestartsKeepData(t *testing.T) {
	sys := harness.Start(t)
	if _, errOut, err := sys.Kubectl(t, "create", "configmap", "kept", "--from-literal=k=v"); err != nil {
		t.Fatalf("kubectl create configmap: %v\n%s", err, errOut)
	}
	steps := []struct {
		name    string
		restart func(t *testing.T)
	}{
		{name: "core killed", restart: func(t *testing.T) { sys.KillService(t, "core") }},
		{name: "gateway killed", restart: func(t *testing.T) { sys.KillService(t, "gateway") }},
		{name: "gateway terminated", restart: func(t *testing.T) { sys.RestartService(t, "gateway") }},
		{name: "launcher run again", restart: func(t *testing.T) { sys.Relaunch(t) }},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			step.restart(t)
			out, errOut, err := sys.Kubectl(t, "get", "configmap", "kept", "-o", "jsonpath={.data.k}")
			if err != nil {
				t.Fatalf("kubectl get configmap: %v\n%s", err, errOut)
			}
			if strings.TrimSpace(out) != "v" {
				t.Errorf("kubectl get configmap kept: data.k = %q, want v", out)
			}
			cs, err := kubernetes.NewForConfig(sys.RESTConfig(t))
			if err != nil {
				t.Fatal(err)
			}
			ns, err := cs.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
			if err != nil || ns.Name != "kube-system" {
				t.Errorf("client-go get namespace kube-system: %v, %v", ns, err)
			}
		})
	}
}
