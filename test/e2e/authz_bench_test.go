package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/test/e2e/harness"
)

// benchBindings is how many RoleBindings authz indexes during the
// benchmark, none of them for the benchmark's user but one.
const benchBindings = 10000

// BenchmarkAuthzThroughGateway measures what authorization costs a
// request through the gateway with 10,000 bindings stored: a user outside
// system:masters getting the same object (the gateway's decision cache
// answers), getting a new name each time (every request asks authz over
// NATS, the cold path), and the admin (system:masters, never asks) as the
// baseline. Each reports p99 besides ns/op:
//
//	go test -run '^$' -bench AuthzThroughGateway -benchtime 2000x ./e2e/
func BenchmarkAuthzThroughGateway(b *testing.B) {
	sys := harness.Start(b)
	ctx := context.Background()
	admin := clientset(b, sys.RESTConfig(b))
	const ns = "bench-authz"
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	createBindings(b, admin, ns)
	if _, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "reader"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	out, errOut, err := sys.Kubectl(b, "-n", ns, "create", "token", "reader")
	if err != nil {
		b.Fatalf("create token: %v %s", err, errOut)
	}
	reader := clientset(b, sys.TokenConfig(strings.TrimSpace(out)))
	if err := eventually(ctx, time.Minute, func(ctx context.Context) error {
		_, err := reader.CoreV1().ConfigMaps(ns).Get(ctx, "warm", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("get as the reader: %v, want NotFound", err)
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}

	runs := 0
	for _, c := range []struct {
		name string
		cs   kubernetes.Interface
		// fresh names a new object per request, so no cached decision
		// applies.
		fresh bool
	}{
		{name: "user=masters", cs: admin},
		{name: "user=sa/cache=hit", cs: reader},
		{name: "user=sa/cache=miss", cs: reader, fresh: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			runs++
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				name := "same"
				if c.fresh {
					name = fmt.Sprintf("fresh-%d-%d", runs, i)
				}
				start := time.Now()
				_, err := c.cs.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
				lat = append(lat, time.Since(start))
				if !apierrors.IsNotFound(err) {
					b.Fatalf("get %s: %v, want NotFound", name, err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}

// createBindings stores benchBindings RoleBindings of other users, eight
// writers at a time.
func createBindings(b *testing.B, cs kubernetes.Interface, ns string) {
	b.Helper()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < benchBindings; i += writers {
				_, err := cs.RbacV1().RoleBindings(ns).Create(context.Background(), &rbacv1.RoleBinding{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("other-%d", i)},
					RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
					Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: fmt.Sprintf("user-%d", i)}},
				}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("create bindings: %v", err)
	}
}
