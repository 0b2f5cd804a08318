package cacher

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"kplane.dev/libs/storage"
)

const benchNamespaces = 100

func benchKey(i int) string {
	return fmt.Sprintf("/kplane/registry/configmaps/ns-%03d/name-%06d", i%benchNamespaces, i)
}

// benchState returns a state holding keys 0 to n-1, built as the cache's
// list builds it.
func benchState(n int) state {
	items := make([]entry, n)
	for i := range items {
		// kplane-load's labels: one of ten groups, and the run.
		items[i] = newEntry(benchKey(i), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"group": "g" + strconv.Itoa(i%10), "run": "bench"}}})
	}
	st := newState(8, 8, 0)
	st.replace(newItems(items), 1)
	return st
}

// BenchmarkStateChurn is the cache under creates and deletes at a steady
// size: an op is an upsert of a new key and a remove of a present one,
// both chosen at random, as events of many writers arrive.
func BenchmarkStateChurn(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("keys="+strconv.Itoa(n), func(b *testing.B) {
			st := benchState(n)
			present := make([]string, n)
			absent := make([]string, n)
			for i := range n {
				present[i] = benchKey(i)
				absent[i] = benchKey(n + i)
			}
			obj := &corev1.ConfigMap{}
			r := rand.New(rand.NewPCG(1, 2))
			b.ReportAllocs()
			for b.Loop() {
				i, j := r.IntN(n), r.IntN(n)
				if st.upsert(absent[i], obj) != nil {
					b.Fatalf("upsert %s: key was present", absent[i])
				}
				if st.remove(present[j]) == nil {
					b.Fatalf("remove %s: key was absent", present[j])
				}
				absent[i], present[j] = present[j], absent[i]
			}
		})
	}
}

// BenchmarkStateList is a shared list from memory, of one namespace and
// of the whole resource, without the deep copies that do not depend on
// how the cache stores its objects.
func BenchmarkStateList(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		c := &Cacher{st: benchState(n)}
		group := storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"group": "g3"})}
		for _, bc := range []struct {
			name, prefix string
			predicate    storage.SelectionPredicate
			want         int
		}{
			{"namespace", "/kplane/registry/configmaps/ns-007/", storage.SelectionPredicate{}, n / benchNamespaces},
			{"all", "/kplane/registry/configmaps/", storage.SelectionPredicate{}, n},
			{"all/selector", "/kplane/registry/configmaps/", group, n / 10},
		} {
			b.Run(fmt.Sprintf("keys=%d/%s", n, bc.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if res := c.list(bc.prefix, storage.ListOptions{Shared: true, Predicate: bc.predicate}); len(res.Items) != bc.want {
						b.Fatalf("list %s: %d items, want %d", bc.prefix, len(res.Items), bc.want)
					}
				}
			})
		}
	}
}
