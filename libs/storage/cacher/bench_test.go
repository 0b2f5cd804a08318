package cacher_test

import (
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/storage"
)

func BenchmarkList1000(b *testing.B) {
	f := newFixture(b, nil)
	var rv int64
	for i := range 1000 {
		rv = f.create("ns", "o"+strconv.Itoa(i), nil, "v")
	}
	f.synced(rv)
	for _, bc := range []struct {
		name   string
		rv     string
		shared bool
	}{{"rv=0", "0", false}, {"consistent", "", false}, {"rv=0/shared", "0", true}, {"consistent/shared", "", true}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: bc.rv, Shared: bc.shared})
				if err != nil || len(res.Items) != 1000 {
					b.Fatalf("list: %d items, %v", len(res.Items), err)
				}
			}
		})
	}
}

// BenchmarkWatchFanOut measures one write reaching every one of N
// watchers: an op is a write and its delivery to all of them.
func BenchmarkWatchFanOut(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run("watchers="+strconv.Itoa(n), func(b *testing.B) {
			f := newFixture(b, nil)
			f.synced(f.create("ns", "o", nil, "0"))
			ws := make([]watch.Interface, n)
			for i := range ws {
				ws[i] = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
				next(b, ws[i])
			}
			i := 0
			for b.Loop() {
				i++
				f.update("ns", "o", nil, strconv.Itoa(i))
				for _, w := range ws {
					if ev := next(b, w); ev.Type != watch.Modified {
						b.Fatalf("got %s, want MODIFIED", ev.Type)
					}
				}
			}
		})
	}
}
