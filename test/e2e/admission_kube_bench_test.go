package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/test/e2e/harness"
)

// anchorKubeconfigEnv names the kubeconfig of the reference
// kube-apiserver (../shared/anchor/up.sh prints it) that
// BenchmarkAdmissionVsKube runs the same workload against.
const anchorKubeconfigEnv = "KPLANE_ANCHOR_KUBECONFIG"

// admissionConfigs are the admission configurations the writes are
// measured under: nothing, one validating webhook that allows every
// configmap write, and ten ValidatingAdmissionPolicies on configmaps.
func admissionConfigs(hook *admissionWebhook) map[string][]string {
	var vaps []string
	for i := range 10 {
		vaps = append(vaps, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: bench-%[1]d
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  validations:
  - expression: object.metadata.name.size() < %[2]d
    message: name too long
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: bench-%[1]d
spec:
  policyName: bench-%[1]d
  validationActions: [Deny]
`, i, 240+i))
	}
	webhook := strings.Replace(hook.configuration("ValidatingWebhookConfiguration", "bench", "/allow-bench", ""),
		"  objectSelector:\n    matchLabels:\n      kplane.test/case: bench\n", "", 1)
	webhook = strings.Replace(webhook, `operations: ["CREATE"]`, `operations: ["CREATE", "UPDATE"]`, 1)
	return map[string][]string{"none": nil, "webhook": {webhook}, "vap10": vaps}
}

// benchTarget is one API server the workload runs against.
type benchTarget struct {
	name string
	cs   kubernetes.Interface
	// apply creates the objects of a manifest; remove deletes them.
	apply, remove func(b *testing.B, manifest string)
}

// BenchmarkAdmissionVsKube measures creates and updates of configmaps,
// one at a time (latency) and from 16 clients at once (throughput),
// through kplane's gateway and, when KPLANE_ANCHOR_KUBECONFIG names it,
// through the reference kube-apiserver, under each admission
// configuration:
//
//	KC=$(../shared/anchor/up.sh)
//	KPLANE_ANCHOR_KUBECONFIG=$KC go test -run '^$' -bench AdmissionVsKube -benchtime 2000x -count 3 ./e2e/
//
// Each round runs every configuration on both servers in turn, so that
// machine noise hits both; compare the ns/op of the same workload.
func BenchmarkAdmissionVsKube(b *testing.B) {
	sys := harness.Start(b)
	hook := newAdmissionWebhook(b)
	targets := []benchTarget{{
		name:  "kplane",
		cs:    clientset(b, unthrottled(sys.RESTConfig(b))),
		apply: func(b *testing.B, m string) { applyManifestB(b, sys.Kubeconfig, m) },
		remove: func(b *testing.B, m string) {
			deleteManifestB(b, sys.Kubeconfig, m)
		},
	}}
	if kc := os.Getenv(anchorKubeconfigEnv); kc != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			b.Fatalf("read %s: %v", anchorKubeconfigEnv, err)
		}
		targets = append(targets, benchTarget{
			name:   "kube",
			cs:     clientset(b, unthrottled(cfg)),
			apply:  func(b *testing.B, m string) { applyManifestB(b, kc, m) },
			remove: func(b *testing.B, m string) { deleteManifestB(b, kc, m) },
		})
	}
	for _, t := range targets {
		if _, err := t.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-admission"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatalf("%s: create namespace: %v", t.name, err)
		}
	}
	configs := admissionConfigs(hook)
	var runs atomic.Int64
	for _, config := range []string{"none", "webhook", "vap10"} {
		for _, t := range targets {
			for _, m := range configs[config] {
				t.apply(b, m)
			}
			awaitAdmissionConfig(b, t, hook, config)
			for _, op := range []struct {
				name string
				run  func(b *testing.B, cs kubernetes.Interface, prefix string)
			}{
				{"create", benchCreateIn("bench-admission")},
				{"update", benchUpdateIn("bench-admission")},
				{"create-parallel", benchCreateParallel("bench-admission")},
				{"update-parallel", benchUpdateParallel("bench-admission")},
			} {
				b.Run(fmt.Sprintf("%s/admission=%s/server=%s", op.name, config, t.name), func(b *testing.B) {
					op.run(b, t.cs, fmt.Sprintf("%s-%d", config, runs.Add(1)))
				})
			}
			for _, m := range configs[config] {
				t.remove(b, m)
			}
		}
	}
}

// awaitAdmissionConfig waits until config is in force on t: the webhook
// is asked, or a configmap the policies refuse is refused.
func awaitAdmissionConfig(b *testing.B, t benchTarget, hook *admissionWebhook, config string) {
	b.Helper()
	ctx := context.Background()
	err := eventually(ctx, 30*time.Second, func(ctx context.Context) error {
		switch config {
		case "webhook":
			before, _ := hook.callsOf("/allow-bench")
			if _, err := t.cs.CoreV1().ConfigMaps("bench-admission").Create(ctx, benchConfigMap("bench-admission", fmt.Sprintf("await-%d", time.Now().UnixNano())), metav1.CreateOptions{}); err != nil {
				return err
			}
			if after, _ := hook.callsOf("/allow-bench"); after == before {
				return fmt.Errorf("%s: the webhook is not asked yet", t.name)
			}
		case "vap10":
			_, err := t.cs.CoreV1().ConfigMaps("bench-admission").Create(ctx, benchConfigMap("bench-admission", strings.Repeat("a", 245)), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "name too long") {
				return fmt.Errorf("%s: a name the policies refuse: %v", t.name, err)
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchCreateIn(namespace string) func(b *testing.B, cs kubernetes.Interface, prefix string) {
	return func(b *testing.B, cs kubernetes.Interface, prefix string) {
		ctx := context.Background()
		i := 0
		for b.Loop() {
			i++
			if _, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, benchConfigMap(namespace, prefix+"-"+strconv.Itoa(i)), metav1.CreateOptions{}); err != nil {
				b.Fatalf("create: %v", err)
			}
		}
	}
}

func benchUpdateIn(namespace string) func(b *testing.B, cs kubernetes.Interface, prefix string) {
	return func(b *testing.B, cs kubernetes.Interface, prefix string) {
		ctx := context.Background()
		cm, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, benchConfigMap(namespace, prefix+"-update"), metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		i := 0
		for b.Loop() {
			i++
			cm.Data[dataKey] = strconv.Itoa(i)
			if cm, err = cs.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				b.Fatalf("update: %v", err)
			}
		}
	}
}

// parallelClients is how many clients write at once in the throughput
// workloads: b.SetParallelism multiplies GOMAXPROCS.
const parallelClients = 16

func benchCreateParallel(namespace string) func(b *testing.B, cs kubernetes.Interface, prefix string) {
	return func(b *testing.B, cs kubernetes.Interface, prefix string) {
		ctx := context.Background()
		var n atomic.Int64
		b.SetParallelism(max(1, parallelClients/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				name := prefix + "-p-" + strconv.FormatInt(n.Add(1), 10)
				if _, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, benchConfigMap(namespace, name), metav1.CreateOptions{}); err != nil {
					b.Errorf("create: %v", err)
					return
				}
			}
		})
	}
}

func benchUpdateParallel(namespace string) func(b *testing.B, cs kubernetes.Interface, prefix string) {
	return func(b *testing.B, cs kubernetes.Interface, prefix string) {
		ctx := context.Background()
		var n atomic.Int64
		b.SetParallelism(max(1, parallelClients/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			// Each client updates its own configmap, so that no update
			// conflicts.
			cm, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, benchConfigMap(namespace, prefix+"-pu-"+strconv.FormatInt(n.Add(1), 10)), metav1.CreateOptions{})
			if err != nil {
				b.Errorf("create: %v", err)
				return
			}
			i := 0
			for pb.Next() {
				i++
				cm.Data[dataKey] = strconv.Itoa(i)
				if cm, err = cs.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
					b.Errorf("update: %v", err)
					return
				}
			}
		})
	}
}

// applyManifestB creates the objects of manifest with kubectl against
// kubeconfig.
func applyManifestB(b *testing.B, kubeconfig, manifest string) {
	b.Helper()
	kubectlManifest(b, kubeconfig, "apply", manifest)
}

func deleteManifestB(b *testing.B, kubeconfig, manifest string) {
	b.Helper()
	kubectlManifest(b, kubeconfig, "delete", manifest)
}

func kubectlManifest(b *testing.B, kubeconfig, verb, manifest string) {
	b.Helper()
	file := b.TempDir() + "/manifest.yaml"
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		b.Fatal(err)
	}
	out, err := exec.Command("kubectl", "--kubeconfig", kubeconfig, verb, "-f", file).CombinedOutput()
	if err != nil {
		b.Fatalf("kubectl %s: %v\n%s", verb, err, out)
	}
}
