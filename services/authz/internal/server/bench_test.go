package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kplane.dev/libs/natsrpc"
	"kplane.dev/proto/authz"
)

// BenchmarkAccessReviewNATS measures decisions through NATS, cold (no
// cache in front), against one replica that holds 10,000 bindings it read
// from the API with its informers: 2,000 ClusterRoleBindings and 8,000
// RoleBindings over 1,000 namespaces. It reports decisions/s and the p99
// latency seen by 1 and by 16 concurrent callers.
func BenchmarkAccessReviewNATS(b *testing.B) {
	const clusterBindings, namespacedBindings, namespaces = 2000, 8000, 1000
	e := newEnv(b)
	start(b, e.options())
	c := e.api.Client
	ctx := context.Background()
	view := []rbacv1.PolicyRule{{Verbs: []string{"get", "list", "watch"}, APIGroups: []string{""}, Resources: []string{"pods", "configmaps"}}}
	create(b, c.RbacV1().ClusterRoles().Create, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view"}, Rules: view})
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}
	work := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				var err error
				if i < clusterBindings {
					_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crb-%d", i)}, RoleRef: ref,
						Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: fmt.Sprintf("cluster-user-%d", i)}},
					}, metav1.CreateOptions{})
				} else {
					j := i - clusterBindings
					ns := fmt.Sprintf("ns-%d", j%namespaces)
					_, err = c.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
						ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("rb-%d", j)}, RoleRef: ref,
						Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: fmt.Sprintf("user-%d", j)}},
					}, metav1.CreateOptions{})
				}
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	for i := range clusterBindings + namespacedBindings {
		work <- i
	}
	close(work)
	wg.Wait()
	last := namespacedBindings - 1
	eventually(b, "last binding seen", func() error {
		st, err := ask(b, e, resourceSAR(fmt.Sprintf("user-%d", last), nil, "get", "", "pods", fmt.Sprintf("ns-%d", last%namespaces), "p"))
		if err != nil {
			return err
		}
		if !st.Allowed {
			return &diffError{"not allowed yet"}
		}
		return nil
	})

	r := rand.New(rand.NewPCG(1, 2))
	requests := make([]*authorizationv1.SubjectAccessReview, 4096)
	for i := range requests {
		j := r.IntN(namespacedBindings)
		ns := fmt.Sprintf("ns-%d", j%namespaces)
		if r.IntN(2) == 0 {
			ns = fmt.Sprintf("ns-%d", r.IntN(namespaces))
		}
		verb := []string{"get", "list", "delete"}[r.IntN(3)]
		requests[i] = resourceSAR(fmt.Sprintf("user-%d", j), []string{"system:authenticated"}, verb, "", "pods", ns, "")
	}
	for _, callers := range []int{1, 16} {
		b.Run(fmt.Sprintf("callers=%d", callers), func(b *testing.B) {
			measure(b, e, requests, callers)
		})
	}
}

// measure sends b.N requests from callers concurrent callers and reports
// decisions/s and the p99 latency.
func measure(b *testing.B, e *env, requests []*authorizationv1.SubjectAccessReview, callers int) {
	ctx := context.Background()
	var wg sync.WaitGroup
	latencies := make([][]time.Duration, callers)
	var next atomic.Int64
	b.ResetTimer()
	begin := time.Now()
	for w := range callers {
		nc := e.conn(b)
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				var out authorizationv1.SubjectAccessReview
				t0 := time.Now()
				if err := natsrpc.RequestJSON(ctx, nc, authz.SubjectAccessReview, requests[i%int64(len(requests))], &out); err != nil {
					b.Error(err)
					return
				}
				latencies[w] = append(latencies[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(begin)
	b.StopTimer()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	if len(all) > 0 {
		b.ReportMetric(float64(len(all))/elapsed.Seconds(), "decisions/s")
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	}
}
