package e2e

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// TestLauncherRestartsAService kills and restarts core under the launcher
// (core alone, talked to as the gateway does) and checks that what was
// written before is still served after each.
func TestLauncherRestartsAService(t *testing.T) {
	sys := harness.Start(t, harness.WithServices("core"))
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(sys.CoreConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	tests := []struct {
		name    string
		restart func(testing.TB, string) int
	}{
		{name: "killed", restart: sys.KillService},
		{name: "terminated", restart: sys.RestartService},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := sys.PID(t, "core")
			if pid := tt.restart(t, "core"); pid == old {
				t.Fatalf("core still runs as pid %d", old)
			}
			got, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
			if err != nil {
				t.Fatalf("get after the restart: %v", err)
			}
			if got.Data["k"] != "v" {
				t.Errorf("after the restart got data %v, want k=v", got.Data)
			}
		})
	}
}
