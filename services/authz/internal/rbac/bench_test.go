package rbac

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
)

// benchWorld has 10,000 bindings: 2,000 ClusterRoleBindings and 8,000
// RoleBindings over 1,000 namespaces, to users, service accounts and groups,
// plus bindings every authenticated user meets, as kube's bootstrap policy
// has.
func benchWorld() (world, []Attributes) {
	const namespaces, clusterBindings, namespacedBindings = 1000, 2000, 8000
	r := rand.New(rand.NewPCG(10, 10000))
	w := world{clusterRoles: []rbacv1.ClusterRole{
		clusterRole("discovery", nil, urlRule(l("get"), "/api", "/api/*", "/apis", "/apis/*", "/version", "/healthz")),
		clusterRole("view", nil,
			rule(l("get", "list", "watch"), l(""), l("pods", "services", "configmaps", "pods/log")),
			rule(l("get", "list", "watch"), l("apps"), l("deployments", "replicasets", "statefulsets"))),
		clusterRole("edit", nil,
			rule(l("create", "update", "patch", "delete"), l(""), l("pods", "services", "configmaps")),
			rule(l("update", "patch"), l("apps"), l("deployments", "deployments/scale"))),
		clusterRole("named", nil, rule(l("get", "update"), l(""), l("secrets"), "s1", "s2", "s3")),
	}}
	w.clusterRoleBindings = append(w.clusterRoleBindings,
		crb("system:discovery", "ClusterRole", "discovery", group("system:authenticated"), group("system:unauthenticated")))
	for i := range clusterBindings - 1 {
		w.clusterRoleBindings = append(w.clusterRoleBindings,
			crb(fmt.Sprintf("crb-%d", i), "ClusterRole", pick(r, l("view", "named")), user(fmt.Sprintf("cluster-user-%d", i))))
	}
	for i := range namespaces {
		ns := fmt.Sprintf("ns-%d", i)
		w.roles = append(w.roles, role(ns, "local", rule(l("*"), l("batch"), l("jobs", "cronjobs"))))
	}
	for i := range namespacedBindings {
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		var subject rbacv1.Subject
		switch i % 3 {
		case 0:
			subject = user(fmt.Sprintf("user-%d", i))
		case 1:
			subject = sa(ns, fmt.Sprintf("sa-%d", i))
		default:
			subject = group(fmt.Sprintf("team-%d", i%50))
		}
		w.roleBindings = append(w.roleBindings,
			rb(ns, fmt.Sprintf("rb-%d", i), pick(r, l("Role", "ClusterRole")), pick(r, l("local", "view", "edit")), subject))
	}
	// Requests by the subjects of the bindings, in their namespace or
	// another, for resources they may or may not hold.
	var requests []Attributes
	for range 4096 {
		i := r.IntN(namespacedBindings)
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		if r.IntN(4) == 0 {
			ns = fmt.Sprintf("ns-%d", r.IntN(namespaces))
		}
		var name string
		var groups []string
		switch i % 3 {
		case 0:
			name = fmt.Sprintf("user-%d", i)
		case 1:
			name = saUser(ns, fmt.Sprintf("sa-%d", i))
			groups = saGroups(ns)
		default:
			name = "member"
			groups = l(fmt.Sprintf("team-%d", i%50), "system:authenticated")
		}
		if r.IntN(8) == 0 {
			name = fmt.Sprintf("cluster-user-%d", r.IntN(clusterBindings-1))
		}
		groups = append(groups, "system:authenticated")
		if r.IntN(10) == 0 {
			requests = append(requests, nonRes(name, groups, "get", pick(r, l("/api", "/apis/apps/v1", "/metrics"))))
			continue
		}
		requests = append(requests, res(name, groups, pick(r, l("get", "list", "update", "delete")), pick(r, l("", "apps", "batch")),
			pick(r, l("pods", "deployments", "jobs", "secrets")), pick(r, l("", "", "", "scale", "log")), ns, pick(r, l("", "s1", "x"))))
	}
	return w, requests
}

// BenchmarkAuthorize measures one uncached decision with 10,000 bindings and
// reports the 99th percentile of the measured calls.
func BenchmarkAuthorize(b *testing.B) {
	w, requests := benchWorld()
	a := newTestAuthorizer(b, w)
	ctx := context.Background()
	latencies := make([]time.Duration, 0, b.N)
	allowed := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		d, _, err := a.Authorize(ctx, requests[i%len(requests)])
		latencies = append(latencies, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		if d == DecisionAllow {
			allowed++
		}
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(allowed)/float64(len(latencies)), "allowed-ratio")
}

// BenchmarkAuthorizeParallel measures decisions per second with every core
// deciding at once, as one replica under load does.
func BenchmarkAuthorizeParallel(b *testing.B) {
	w, requests := benchWorld()
	a := newTestAuthorizer(b, w)
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(requests))
		for pb.Next() {
			if _, _, err := a.Authorize(ctx, requests[i%len(requests)]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "decisions/s")
}

// BenchmarkSetRoleBinding measures one incremental update with 10,000
// bindings in the index.
func BenchmarkSetRoleBinding(b *testing.B) {
	w, _ := benchWorld()
	idx := NewIndex()
	w.load(idx)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		binding := w.roleBindings[i%len(w.roleBindings)]
		idx.SetRoleBinding(&binding)
	}
}
