package cacher_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
)

// page is what a client sees of one page.
type page struct {
	names     []string
	rv        int64
	continued string
	remaining *int64
}

func pageFrom(res *storage.ListResult) page {
	p := page{rv: res.ResourceVersion, continued: res.Continue, remaining: res.RemainingItemCount}
	for _, o := range res.Items {
		cm := o.(*corev1.ConfigMap)
		p.names = append(p.names, cm.Namespace+"/"+cm.Name)
	}
	return p
}

func (p page) String() string {
	r := "nil"
	if p.remaining != nil {
		r = fmt.Sprint(*p.remaining)
	}
	return fmt.Sprintf("%v at %d, continue %q, remaining %s", p.names, p.rv, p.continued, r)
}

// pages lists everything below prefix in pages of limit through list.
func pages(t *testing.T, list func(storage.ListOptions) (*storage.ListResult, error), pred storage.SelectionPredicate, limit int64) []page {
	t.Helper()
	var out []page
	opts := storage.ListOptions{Limit: limit, Predicate: pred}
	for {
		res, err := list(opts)
		if err != nil {
			t.Fatalf("list %+v: %v", opts, err)
		}
		out = append(out, pageFrom(res))
		if res.Continue == "" {
			return out
		}
		opts.Continue = res.Continue
	}
}

// The cache pages as etcd does, page for page: the same objects, continue
// tokens, revisions and remaining counts, for any limit, selector and
// namespace, and without reading etcd.
func TestPagedListsAreEtcdsServedFromMemory(t *testing.T) {
	f := newFixture(t, nil)
	var rv int64
	for i := range 7 {
		for _, ns := range []string{"a", "b"} {
			rv = f.create(ns, fmt.Sprintf("cm-%d", i), map[string]string{"odd": fmt.Sprint(i%2 == 1)}, "")
		}
	}
	f.synced(rv)
	odd := storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"odd": "true"})}
	for _, prefix := range []string{f.keys.Prefix(), f.keys.NamespacePrefix("a")} {
		for _, pred := range []storage.SelectionPredicate{storage.SelectionPredicate{}, odd} {
			for _, limit := range []int64{1, 2, 3, 7, 14, 15} {
				t.Run(fmt.Sprintf("%s/%v/%d", strings.TrimPrefix(prefix, f.keys.Prefix()), pred.Label, limit), func(t *testing.T) {
					before := f.store.lists.Load()
					got := pages(t, func(o storage.ListOptions) (*storage.ListResult, error) { return f.cacher.List(f.ctx, prefix, o) }, pred, limit)
					if n := f.store.lists.Load() - before; n != 0 {
						t.Errorf("paging went to etcd %d times, want every page from memory", n)
					}
					want := pages(t, func(o storage.ListOptions) (*storage.ListResult, error) { return f.store.Store.List(f.ctx, prefix, o) }, pred, limit)
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("pages from the cache:\n%v\nfrom etcd:\n%v", got, want)
					}
				})
			}
		}
	}
}

// Later pages show the objects as of the first, whatever was written in
// between; a token whose snapshot the cache does not have is read from
// etcd, at its revision.
func TestPagesKeepTheirRevision(t *testing.T) {
	f := newFixture(t, nil)
	var rv int64
	for i := range 4 {
		rv = f.create("ns", fmt.Sprintf("cm-%d", i), nil, "old")
	}
	f.synced(rv)
	first, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{Limit: 2, Predicate: storage.SelectionPredicate{}})
	if err != nil {
		t.Fatal(err)
	}
	f.update("ns", "cm-2", nil, "new")
	f.delete("ns", "cm-3")
	f.synced(f.create("ns", "cm-4", nil, "new"))
	before := f.store.lists.Load()
	rest, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{Limit: 2, Continue: first.Continue, Predicate: storage.SelectionPredicate{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageFrom(rest); !reflect.DeepEqual(got.names, []string{"ns/cm-2", "ns/cm-3"}) || got.rv != first.ResourceVersion || got.continued != "" || values(rest.Items) != "old,old" {
		t.Fatalf("second page %v (values %s), want ns/cm-2 and ns/cm-3 as they were at %d", got, values(rest.Items), first.ResourceVersion)
	}
	if n := f.store.lists.Load() - before; n != 0 {
		t.Errorf("the second page went to etcd %d times, want it from the first page's snapshot", n)
	}

	// A token the cache never issued, at a revision it has no snapshot of.
	token, err := storage.EncodeContinue(f.keys.Object("ns", "cm-1")+"\x00", f.keys.Prefix(), rv-1)
	if err != nil {
		t.Fatal(err)
	}
	res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{Limit: 10, Continue: token, Predicate: storage.SelectionPredicate{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pageFrom(res); !reflect.DeepEqual(got.names, []string{"ns/cm-2"}) || got.rv != rv-1 {
		t.Fatalf("page of a foreign token %v, want ns/cm-2 at %d", got, rv-1)
	}
	if n := f.store.lists.Load() - before; n != 1 {
		t.Errorf("a token without a snapshot went to etcd %d times, want once", n)
	}
}

func values(objs []runtime.Object) string {
	var vs []string
	for _, o := range objs {
		vs = append(vs, o.(*corev1.ConfigMap).Data["v"])
	}
	return strings.Join(vs, ",")
}

// With fallible decoding (a custom resource's conversion webhook),
// consistent gets and paged lists read etcd, which reports the failure.
func TestFallibleDecodingReadsEtcd(t *testing.T) {
	f := newFixture(t, nil, cacher.WithFallibleDecoding())
	f.create("ns", "a", nil, "")
	f.synced(f.create("ns", "b", nil, ""))
	gets, lists := f.store.gets.Load(), f.store.lists.Load()
	if _, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	got := pages(t, func(o storage.ListOptions) (*storage.ListResult, error) {
		return f.cacher.List(f.ctx, f.keys.Prefix(), o)
	}, storage.SelectionPredicate{}, 1)
	if len(got) != 2 {
		t.Fatalf("pages %v, want 2", got)
	}
	if n := f.store.gets.Load() - gets; n != 1 {
		t.Errorf("a consistent get read etcd %d times, want once", n)
	}
	if n := f.store.lists.Load() - lists; n != 2 {
		t.Errorf("two pages read etcd %d times, want twice", n)
	}
}
