package e2e

import (
	"context"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/deploy/launcher"
	"kplane.dev/test/e2e/harness"
)

// BenchmarkAdmissionCost measures what asking the admission service about
// every write costs when nothing is configured in it: the same creates
// and updates through the gateway with admission running (core asks it,
// two NATS round trips a write) and without it (--services leaves it
// out, so core asks nothing):
//
//	go test -run '^$' -bench AdmissionCost -benchtime 300x -count 2 ./e2e/
//
// (-count 2 alternates the two systems, so that machine noise hits both.)
func BenchmarkAdmissionCost(b *testing.B) {
	var withoutAdmission []string
	for _, s := range launcher.Services() {
		if s.Name != "admission" {
			withoutAdmission = append(withoutAdmission, s.Name)
		}
	}
	// runs numbers the sub-benchmarks' runs, whose objects are named
	// after it so that every run creates its own.
	runs := 0
	for _, tc := range []struct {
		admission string
		opts      []harness.Option
	}{
		{admission: "none", opts: []harness.Option{harness.WithServices(withoutAdmission...)}},
		{admission: "service"},
	} {
		sys := harness.Start(b, tc.opts...)
		cs := clientset(b, sys.RESTConfig(b))
		if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-create"}}, metav1.CreateOptions{}); err != nil {
			b.Fatalf("create namespace: %v", err)
		}
		for _, op := range []struct {
			name string
			run  func(b *testing.B, cs kubernetes.Interface, prefix string)
		}{{"create", benchCreate}, {"update", benchUpdate}} {
			b.Run(op.name+"/admission="+tc.admission, func(b *testing.B) {
				runs++
				op.run(b, cs, tc.admission+"-"+strconv.Itoa(runs))
			})
		}
		// One system at a time: the other's idle work would be noise.
		sys.Stop(b)
	}
}
