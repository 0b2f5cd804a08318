package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/test/e2e/harness"
)

// auditRounds is how often each level of each op is measured.
const auditRounds = 3

// auditBenchPolicy audits each benchmark namespace at its own level, so
// that one system serves all three and machine noise hits them alike;
// "off" is level None: the policy is read, no event is made.
const auditBenchPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  namespaces: ["bench-audit-metadata"]
- level: RequestResponse
  namespaces: ["bench-audit-requestresponse"]
`

// BenchmarkAudit measures the throughput of creates and gets of
// configmaps through the gateway, with eight clients at once, audited
// to the log at no level, Metadata and RequestResponse. The levels take
// turns, auditRounds times, so that they share the machine's drift;
// compare the levels of each op:
//
//	go test -run '^$' -bench 'Audit$' -benchtime 2000x ./e2e/
func BenchmarkAudit(b *testing.B) {
	path := filepath.Join(b.TempDir(), "policy.yaml")
	if err := os.WriteFile(path, []byte(auditBenchPolicy), 0o600); err != nil {
		b.Fatal(err)
	}
	sys := harness.Start(b, harness.WithArgs("gateway", "--audit-policy-file="+path))
	cs := clientset(b, sys.RESTConfig(b))
	ctx := context.Background()
	levels := []string{"off", "metadata", "requestresponse"}
	for _, l := range levels {
		ns := "bench-audit-" + l
		if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace %s: %v", ns, err)
		}
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(ns, "got"), metav1.CreateOptions{}); err != nil {
			b.Fatalf("create the configmap to get: %v", err)
		}
	}
	var created atomic.Int64
	for range auditRounds {
		for _, op := range []string{"create", "get"} {
			for _, l := range levels {
				ns := "bench-audit-" + l
				b.Run(op+"/level="+l, func(b *testing.B) {
					b.SetParallelism(4)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							var err error
							if op == "create" {
								_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, benchConfigMap(ns, "c-"+strconv.FormatInt(created.Add(1), 10)), metav1.CreateOptions{})
							} else {
								_, err = cs.CoreV1().ConfigMaps(ns).Get(ctx, "got", metav1.GetOptions{})
							}
							if err != nil {
								b.Errorf("%s: %v", op, err)
								return
							}
						}
					})
				})
			}
		}
	}
}
