package cacher_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/etcdtest"
	"kplane.dev/libs/storage"
	"kplane.dev/libs/storage/cacher"
	"kplane.dev/libs/storage/cacher/cachertest"
	"kplane.dev/libs/storage/etcd3"
)

func TestReadsAtZeroAreServedFromMemory(t *testing.T) {
	f := newFixture(t, nil)
	f.create("ns1", "a", nil, "1")
	rv := f.create("ns2", "b", nil, "2")
	f.synced(rv)

	// With etcd gone, only the cache can answer.
	f.etcd.Stop()
	res, err := f.cacher.List(f.ctx, f.keys.NamespacePrefix("ns2"), storage.ListOptions{ResourceVersion: "0", Limit: 1})
	if err != nil {
		t.Fatalf("list at 0 with etcd stopped: %v", err)
	}
	if len(res.Items) != 1 || res.Items[0].(*corev1.ConfigMap).Name != "b" || res.ResourceVersion != rv {
		t.Fatalf("list at 0 = %d items at %d, want b at %d", len(res.Items), res.ResourceVersion, rv)
	}
	obj, err := f.cacher.Get(f.ctx, f.keys.Object("ns1", "a"), storage.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("get at 0 with etcd stopped: %v", err)
	}
	// Callers may change what they get; the cache must not see it.
	obj.(*corev1.ConfigMap).Data["v"] = "changed"
	again, err := f.cacher.Get(f.ctx, f.keys.Object("ns1", "a"), storage.GetOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("get at 0 again: %v", err)
	}
	if v := again.(*corev1.ConfigMap).Data["v"]; v != "1" {
		t.Fatalf("cached object changed through a returned copy: v = %q", v)
	}
	if _, err := f.cacher.Get(f.ctx, f.keys.Object("ns1", "missing"), storage.GetOptions{ResourceVersion: strconv.FormatInt(rv, 10)}); !storage.IsNotFound(err) {
		t.Fatalf("get missing at %d: err = %v, want not found", rv, err)
	}
}

func TestListsComeInKeyOrderWithSelectors(t *testing.T) {
	f := newFixture(t, nil)
	f.create("ns2", "c", map[string]string{"app": "x"}, "")
	f.create("ns1", "b", map[string]string{"app": "y"}, "")
	f.create("ns10", "d", map[string]string{"app": "x"}, "")
	rv := f.create("ns1", "a", map[string]string{"app": "x"}, "")
	f.synced(rv)

	x := storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"app": "x"})}
	tests := []struct {
		name   string
		prefix string
		opts   storage.ListOptions
		want   []string
	}{
		{"all at 0", f.keys.Prefix(), storage.ListOptions{ResourceVersion: "0"}, []string{"a", "b", "d", "c"}},
		{"consistent", f.keys.Prefix(), storage.ListOptions{}, []string{"a", "b", "d", "c"}},
		{"namespace is not a prefix of another", f.keys.NamespacePrefix("ns1"), storage.ListOptions{ResourceVersion: "0"}, []string{"a", "b"}},
		{"label selector", f.keys.Prefix(), storage.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), Predicate: x}, []string{"a", "d", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.cacher.List(f.ctx, tt.prefix, tt.opts)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var names []string
			for _, o := range res.Items {
				names = append(names, o.(*corev1.ConfigMap).Name)
			}
			if !slices.Equal(names, tt.want) {
				t.Fatalf("list = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestConsistentListOfAnIdleResourceIsServedFromMemory(t *testing.T) {
	f := newFixture(t, nil)
	f.synced(f.create("ns", "a", nil, ""))
	// etcd moves on while the resource stays idle: only a progress
	// notification can tell the cache it is current.
	want := f.bumpEtcd()
	before := f.store.lists.Load()
	res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{})
	if err != nil {
		t.Fatalf("consistent list: %v", err)
	}
	if res.ResourceVersion < want || len(res.Items) != 1 {
		t.Fatalf("consistent list = %d items at %d, want 1 at %d or later", len(res.Items), res.ResourceVersion, want)
	}
	if n := f.store.lists.Load() - before; n != 0 {
		t.Fatalf("consistent list went to etcd %d times, want it served from the cache", n)
	}
}

// TestLabelSelectorListsFollowLabelChanges: a list by label finds
// exactly the objects that have the labels now, whether it asks for them
// by equality or otherwise, through objects relabelled, given more labels
// than the cache keeps hashes of, and listed again after a relist.
func TestLabelSelectorListsFollowLabelChanges(t *testing.T) {
	f := newFixture(t, nil)
	many := map[string]string{"app": "x", "a": "1", "b": "2", "c": "3", "d": "4"}
	f.create("ns", "a", map[string]string{"app": "x", "tier": "web"}, "")
	f.create("ns", "b", map[string]string{"app": "y"}, "")
	f.create("ns", "c", many, "")
	f.create("ns", "d", nil, "")
	rv := f.update("ns", "b", map[string]string{"app": "x", "tier": "db"}, "")
	f.synced(rv)
	list := func(selector string) []string {
		t.Helper()
		sel, err := labels.Parse(selector)
		if err != nil {
			t.Fatal(err)
		}
		res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10), Predicate: storage.SelectionPredicate{Label: sel}})
		if err != nil {
			t.Fatalf("list %s: %v", selector, err)
		}
		var names []string
		for _, o := range res.Items {
			names = append(names, o.(*corev1.ConfigMap).Name)
		}
		return names
	}
	for _, tt := range []struct {
		selector string
		want     []string
	}{
		{"app=x", []string{"a", "b", "c"}},
		{"app==x,tier=db", []string{"b"}},
		{"app in (x),tier=web", []string{"a"}},
		{"app in (x,y),d=4", []string{"c"}},
		{"app=y", nil},
		{"app!=x", []string{"d"}},
		{"tier", []string{"a", "b"}},
		{"!app", []string{"d"}},
	} {
		if got := list(tt.selector); !slices.Equal(got, tt.want) {
			t.Errorf("list %s = %v, want %v", tt.selector, got, tt.want)
		}
	}
	rv = f.update("ns", "c", map[string]string{"app": "z"}, "")
	f.synced(rv)
	if got := list("app=x"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("list app=x after c was relabelled = %v, want [a b]", got)
	}
	if got := list("app=z"); !slices.Equal(got, []string{"c"}) {
		t.Errorf("list app=z after c was relabelled = %v, want [c]", got)
	}
}

func TestReadsAheadOfTheCache(t *testing.T) {
	f := newFixture(t, nil, cacher.WithWaitTimeout(50*time.Millisecond))
	rv := f.create("ns", "a", nil, "")
	f.synced(rv)
	ahead := strconv.FormatInt(rv+1000, 10)
	if _, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{ResourceVersion: ahead}); storage.CodeOf(err) != storage.ErrCodeTooLargeResourceVersion {
		t.Fatalf("get at %s: err = %v, want too large resource version", ahead, err)
	}
	if _, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: ahead}); storage.CodeOf(err) != storage.ErrCodeTooLargeResourceVersion {
		t.Fatalf("list at %s: err = %v, want too large resource version", ahead, err)
	}
}

func TestGetAtARevisionEtcdReachedWaitsOnAnIdleResource(t *testing.T) {
	f := newFixture(t, nil)
	rv := f.create("ns", "a", nil, "")
	f.synced(rv)
	later := f.bumpEtcd()
	obj, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{ResourceVersion: strconv.FormatInt(later, 10)})
	if err != nil {
		t.Fatalf("get at %d: %v", later, err)
	}
	if got := rvOf(t, obj); got != rv {
		t.Fatalf("get at %d returned the object at %d, want %d", later, got, rv)
	}
}

func TestWatchReplaysHistoryThenFollows(t *testing.T) {
	f := newFixture(t, nil)
	from := f.create("ns", "a", nil, "1")
	rvB := f.create("ns", "b", nil, "1")
	rvA := f.update("ns", "a", nil, "2")
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	rvDel := f.delete("ns", "b")
	expect(t, w,
		got{watch.Added, "b", "1", rvB},
		got{watch.Modified, "a", "2", rvA},
		got{watch.Deleted, "b", "1", rvDel},
	)
}

// TestHistoryGrowsWhileFresh: a burst of writes larger than the ring does
// not expire a revision the cache was given moments ago, as kube-apiserver
// keeps its recent events; past the most it may hold, the oldest go.
func TestHistoryGrowsWhileFresh(t *testing.T) {
	f := newFixture(t, nil, cacher.WithGrowingHistory(2, 8, time.Hour))
	first := f.create("ns", "g0", nil, "")
	var last int64
	for i := 1; i < 6; i++ {
		last = f.create("ns", "g"+strconv.Itoa(i), nil, "")
	}
	f.synced(last)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(first, 10)})
	if ev := next(t, w); describe(t, ev).rv != first+1 {
		t.Fatalf("watch from %d after a burst starts with %+v, want the event at %d", first, describe(t, ev), first+1)
	}
	for i := 6; i < 12; i++ {
		last = f.create("ns", "g"+strconv.Itoa(i), nil, "")
	}
	f.synced(last)
	w = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(first, 10)})
	if evs := expectClosed(t, w); len(evs) != 1 || evs[0].Type != watch.Error {
		t.Fatalf("watch from %d beyond the most history delivered %v, want one error", first, evs)
	}
}

// TestHistoryShrinksWhenStale: once the events that grew the history
// are older than the fresh window, the next events halve it again, as
// kube-apiserver's watch cache shrinks, rather than holding a burst's
// events (and their objects) for good.
func TestHistoryShrinksWhenStale(t *testing.T) {
	const fresh = 2 * time.Second
	f := newFixture(t, nil, cacher.WithGrowingHistory(2, 64, fresh))
	var revs []int64
	for i := range 16 {
		revs = append(revs, f.create("ns", "s"+strconv.Itoa(i), nil, ""))
	}
	f.synced(revs[15])
	// The burst grew the history to hold all of it.
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(revs[0], 10)})
	if ev := next(t, w); describe(t, ev).rv != revs[1] {
		t.Fatalf("watch from %d after a burst starts with %+v, want the event at %d", revs[0], describe(t, ev), revs[1])
	}
	time.Sleep(fresh + 100*time.Millisecond)
	var last int64
	for i := range 3 {
		last = f.create("ns", "later"+strconv.Itoa(i), nil, "")
	}
	f.synced(last)
	// Halved twice, to four events: the burst's last one and the three
	// new ones. Without shrinking, sixteen would be held.
	w = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(revs[8], 10)})
	if evs := expectClosed(t, w); len(evs) != 1 || evs[0].Type != watch.Error {
		t.Fatalf("watch from %d after the history went stale delivered %v, want one error", revs[8], evs)
	}
	w = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(revs[14], 10)})
	if ev := next(t, w); describe(t, ev).rv != revs[15] {
		t.Fatalf("watch from %d starts with %+v, want the event at %d", revs[14], describe(t, ev), revs[15])
	}
}

func TestWatchOlderThanHistoryIsExpired(t *testing.T) {
	f := newFixture(t, nil, cacher.WithHistory(3))
	first := f.create("ns", "o0", nil, "")
	var last int64
	for i := 1; i < 6; i++ {
		last = f.create("ns", "o"+strconv.Itoa(i), nil, "")
	}
	f.synced(last)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(first, 10)})
	evs := expectClosed(t, w)
	if len(evs) != 1 || evs[0].Type != watch.Error {
		t.Fatalf("watch from %d delivered %v, want one error", first, evs)
	}
	st, ok := evs[0].Object.(*metav1.Status)
	oldest := last - 3 // the three newest events are held
	wantMsg := "too old resource version: " + strconv.FormatInt(first, 10) + " (" + strconv.FormatInt(oldest, 10) + ")"
	if !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired || st.Message != wantMsg {
		t.Fatalf("error event = %#v, want 410 Expired %q", evs[0].Object, wantMsg)
	}
	// The oldest revision still served works.
	w = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(oldest, 10)})
	if ev := next(t, w); describe(t, ev).rv != oldest+1 {
		t.Fatalf("watch from %d starts with %+v, want the event at %d", oldest, describe(t, ev), oldest+1)
	}
}

func TestWatchFromZeroAndInitialEvents(t *testing.T) {
	f := newFixture(t, nil)
	rvA := f.create("ns", "a", nil, "1")
	rvB := f.create("ns", "b", nil, "1")
	f.synced(rvB)

	legacy := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
	expect(t, legacy, got{watch.Added, "a", "1", rvA}, got{watch.Added, "b", "1", rvB})

	yes := true
	streaming := f.watch(f.keys.Prefix(), storage.WatchOptions{
		SendInitialEvents:    &yes,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowBookmarks:       true,
	})
	expect(t, streaming, got{watch.Added, "a", "1", rvA}, got{watch.Added, "b", "1", rvB})
	select {
	case ev := <-streaming.ResultChan():
		cm, ok := ev.Object.(*corev1.ConfigMap)
		if ev.Type != watch.Bookmark || !ok || cm.Annotations[metav1.InitialEventsAnnotationKey] != "true" || rvOf(t, cm) < rvB {
			t.Fatalf("after the initial events got %s %#v, want the annotated bookmark at %d or later", ev.Type, ev.Object, rvB)
		}
	case <-time.After(wait):
		t.Fatal("no bookmark after the initial events")
	}
	rvC := f.create("ns", "c", nil, "1")
	expect(t, legacy, got{watch.Added, "c", "1", rvC})
	expect(t, streaming, got{watch.Added, "c", "1", rvC})
}

func TestWatchSelectorTransitions(t *testing.T) {
	f := newFixture(t, nil)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{
		ResourceVersion: "0",
		Predicate:       storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"app": "x"})},
	})
	in, out := map[string]string{"app": "x"}, map[string]string{"app": "y"}
	rv1 := f.create("ns", "a", in, "1")
	f.create("ns", "other", out, "1")
	rv2 := f.update("ns", "a", in, "2")
	rv3 := f.update("ns", "a", out, "3")
	f.update("ns", "a", out, "4")
	rv5 := f.update("ns", "a", in, "5")
	rv6 := f.delete("ns", "a")
	expect(t, w,
		got{watch.Added, "a", "1", rv1},
		got{watch.Modified, "a", "2", rv2},
		got{watch.Deleted, "a", "2", rv3}, // the last state selected, at the revision it left
		got{watch.Added, "a", "5", rv5},
		got{watch.Deleted, "a", "5", rv6},
	)
}

func TestBookmarksFollowEtcdOnAnIdleResource(t *testing.T) {
	f := newFixture(t, []etcdtest.Option{etcdtest.WithProgressNotifyInterval(50 * time.Millisecond)},
		cacher.WithBookmarkInterval(20*time.Millisecond))
	f.synced(f.create("ns", "a", nil, ""))
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0", AllowBookmarks: true})
	without := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
	next(t, w)
	next(t, without)

	want := f.bumpEtcd()
	timeout := time.After(wait)
	for seen := int64(0); seen < want; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type != watch.Bookmark {
				t.Fatalf("got %s, want only bookmarks on an idle resource", ev.Type)
			}
			seen = rvOf(t, ev.Object)
		case <-timeout:
			t.Fatalf("no bookmark at %d or later within %v", want, wait)
		}
	}
	rv := f.create("ns", "b", nil, "")
	select {
	case ev := <-without.ResultChan():
		if ev.Type != watch.Added || rvOf(t, ev.Object) != rv {
			t.Fatalf("watch without bookmarks got %s at %d, want only ADDED at %d", ev.Type, rvOf(t, ev.Object), rv)
		}
	case <-time.After(wait):
		t.Fatal("watch without bookmarks got nothing")
	}
}

func TestSlowWatcherIsEndedWithoutHoldingOthersBack(t *testing.T) {
	f := newFixture(t, nil, cacher.WithWatcherBuffer(2), cacher.WithSlowWatcherGrace(10*time.Millisecond))
	slow := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
	fast := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
	const n = 20
	want := make([]got, n)
	for i := range n {
		name := "o" + strconv.Itoa(i)
		want[i] = got{watch.Added, name, "", f.create("ns", name, nil, "")}
		expect(t, fast, want[i])
	}
	// The slow watcher, which read nothing so far, was ended: whatever it
	// still hands over is a prefix of the events, then its channel closes.
	evs := expectClosed(t, slow)
	if len(evs) >= n {
		t.Fatalf("slow watcher got all %d events, want it ended", len(evs))
	}
	for i, ev := range evs {
		if g := describe(t, ev); g != want[i] {
			t.Fatalf("slow watcher event %d = %+v, want %+v", i, g, want[i])
		}
	}
}

// Under a burst of writes a watch-list still sending its initial events
// has a queue of about a second of events, as kube-apiserver's has,
// rather than the configured least, which would end it (and its client
// would list again, all over) before it could read them.
func TestWatchListKeepsUpWhileTheHistoryHasGrown(t *testing.T) {
	// 320 writes within 20 seconds grow the history to 512 events:
	// a queue of 26, where the configured one holds 2.
	f := newFixture(t, nil, cacher.WithGrowingHistory(4, 4096, 20*time.Second),
		cacher.WithWatcherBuffer(2), cacher.WithSlowWatcherGrace(10*time.Millisecond))
	const later = 10
	want, w := f.watchListOf(320)
	// The client reads nothing while these come.
	for i := range later {
		name := fmt.Sprintf("p%03d", i)
		want = append(want, got{watch.Added, name, "", f.create("ns", name, nil, "")})
	}
	// Once the cache has the last of them, every earlier one has been
	// queued for the watch, or has ended it.
	f.synced(want[len(want)-1].rv)
	expect(t, w, want...)
}

// A watch-list whose client reads nothing while more than its queue
// holds is written is not ended: once its initial events are out it
// reads what it missed from the history, each change once and in order;
// when the history no longer holds it, the client is told 410 Expired
// after its initial events, and lists again.
func TestWatchListCatchesUpFromTheHistory(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history int
		expired bool
	}{
		{name: "held", history: 1000},
		{name: "dropped", history: 5, expired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, cacher.WithHistory(tc.history),
				cacher.WithWatcherBuffer(2), cacher.WithSlowWatcherGrace(10*time.Millisecond))
			const later = 20
			initial, w := f.watchListOf(20)
			var missed []got
			// The client reads nothing while these come: some are
			// queued, the rest skipped.
			for i := range later {
				name := fmt.Sprintf("o%03d", i)
				missed = append(missed, got{watch.Modified, name, "2", f.update("ns", name, nil, "2")})
			}
			f.synced(missed[later-1].rv)
			expect(t, w, initial...)
			if !tc.expired {
				expect(t, w, missed...)
				return
			}
			// What was queued, then 410 and the end.
			evs := expectClosed(t, w)
			if len(evs) == 0 || len(evs) > len(missed) {
				t.Fatalf("after the initial events got %d events, want some of the %d changes, then 410 Expired", len(evs), len(missed))
			}
			last := evs[len(evs)-1]
			if st, ok := last.Object.(*metav1.Status); last.Type != watch.Error || !ok || st.Code != http.StatusGone {
				t.Fatalf("the watch ended with %s %v, want 410 Expired", last.Type, last.Object)
			}
			for i, ev := range evs[:len(evs)-1] {
				if g := describe(t, ev); g != missed[i] {
					t.Fatalf("change %d = %+v, want %+v", i, g, missed[i])
				}
			}
		})
	}
}

func TestRewatchAfterTheUnderlyingWatchEnds(t *testing.T) {
	f := newFixture(t, nil)
	rv := f.create("ns", "a", nil, "1")
	f.synced(rv)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(rv, 10)})
	lists := f.store.lists.Load()

	release := f.store.cut()
	want := []got{
		{watch.Added, "b", "1", f.create("ns", "b", nil, "1")},
		{watch.Modified, "a", "2", f.update("ns", "a", nil, "2")},
		{watch.Deleted, "b", "1", f.delete("ns", "b")},
	}
	release()
	want = append(want, got{watch.Added, "c", "1", f.create("ns", "c", nil, "1")})
	// Every change exactly once, in order: nothing lost, nothing repeated.
	expect(t, w, want...)
	if n := f.store.lists.Load() - lists; n != 0 {
		t.Fatalf("cache listed %d times to resume, want a watch from its revision", n)
	}
}

func TestRelistAfterCompactionExpiresWatchers(t *testing.T) {
	f := newFixture(t, nil)
	rv := f.create("ns", "a", nil, "1")
	f.synced(rv)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(rv, 10)})

	release := f.store.cut()
	f.create("ns", "b", nil, "1")
	f.update("ns", "a", nil, "2")
	last := f.create("ns", "c", nil, "1")
	if _, err := f.client.Compact(f.ctx, last, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	release()

	evs := expectClosed(t, w)
	if len(evs) != 1 || evs[0].Type != watch.Error {
		t.Fatalf("watcher across the gap got %v, want one error", evs)
	}
	if st, ok := evs[0].Object.(*metav1.Status); !ok || st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
		t.Fatalf("error event = %#v, want 410 Expired", evs[0].Object)
	}
	res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("list after relist: %v", err)
	}
	if len(res.Items) != 3 || res.ResourceVersion < last {
		t.Fatalf("list after relist = %d items at %d, want 3 at %d or later", len(res.Items), res.ResourceVersion, last)
	}
	if v := res.Items[0].(*corev1.ConfigMap).Data["v"]; v != "2" {
		t.Fatalf("a after relist has v = %q, want 2", v)
	}
	// A client that lists again resumes from the list's revision.
	w = f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(res.ResourceVersion, 10)})
	expect(t, w, got{watch.Added, "d", "1", f.create("ns", "d", nil, "1")})
}

func TestSurvivesAnEtcdRestart(t *testing.T) {
	f := newFixture(t, nil)
	rvA := f.create("ns", "a", nil, "1")
	f.synced(rvA)
	w := f.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
	expect(t, w, got{watch.Added, "a", "1", rvA})

	f.etcd.Restart(t)
	rvB := f.create("ns", "b", nil, "1")
	rvA2 := f.update("ns", "a", nil, "2")
	// The same watch goes on: nothing lost, nothing repeated.
	expect(t, w, got{watch.Added, "b", "1", rvB}, got{watch.Modified, "a", "2", rvA2})
	res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{})
	if err != nil {
		t.Fatalf("consistent list after restart: %v", err)
	}
	if len(res.Items) != 2 || res.ResourceVersion < rvA2 {
		t.Fatalf("consistent list after restart = %d items at %d, want 2 at %d or later", len(res.Items), res.ResourceVersion, rvA2)
	}
}

// A cache that listed after a revision and dropped nothing since, as a
// restarted replica's under a client that watched another replica, never
// held that revision: a watch from it is served by etcd with every change
// since, and expires only once etcd compacted it.
func TestWatchFromBeforeTheCacheListedIsServedByEtcd(t *testing.T) {
	f := newFixture(t, nil)
	from := f.create("ns", "a", nil, "1")
	rvB := f.create("ns", "b", nil, "1")
	rvA := f.update("ns", "a", nil, "2")
	late := *f
	late.cacher = cachertest.Run(t, &spyStore{Store: etcd3.New(f.client, f.objs, f.objs.New)}, f.objs.New, f.keys.Prefix())
	late.synced(rvA)
	w := late.watch(f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	rvDel := f.delete("ns", "b")
	expect(t, w,
		got{watch.Added, "b", "1", rvB},
		got{watch.Modified, "a", "2", rvA},
		got{watch.Deleted, "b", "1", rvDel},
	)

	if _, err := f.client.Compact(f.ctx, rvA, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compact: %v", err)
	}
	w, err := late.cacher.Watch(f.ctx, f.keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(from, 10)})
	if err != nil {
		if !storage.IsExpired(err) {
			t.Fatalf("watch from the compacted %d: %v, want expired", from, err)
		}
		return
	}
	defer w.Stop()
	evs := expectClosed(t, w)
	if len(evs) != 1 || evs[0].Type != watch.Error {
		t.Fatalf("watch from the compacted %d delivered %v, want one error", from, evs)
	}
	if st, ok := evs[0].Object.(*metav1.Status); !ok || st.Code != 410 {
		t.Fatalf("error event = %#v, want 410", evs[0].Object)
	}
}

func TestSharedListsHandOutTheCachedObjects(t *testing.T) {
	f := newFixture(t, nil)
	f.synced(f.create("ns", "a", nil, "1"))
	list := func(shared bool) *corev1.ConfigMap {
		t.Helper()
		res, err := f.cacher.List(f.ctx, f.keys.Prefix(), storage.ListOptions{ResourceVersion: "0", Shared: shared})
		if err != nil || len(res.Items) != 1 {
			t.Fatalf("list: %v, %d items", err, len(res.Items))
		}
		return res.Items[0].(*corev1.ConfigMap)
	}
	if first, again := list(true), list(true); first != again {
		t.Fatal("two shared lists returned different objects, want the one the cache keeps")
	}
	copied := list(false)
	if copied == list(true) {
		t.Fatal("a list that is not shared returned the cached object")
	}
	copied.Data["v"] = "changed"
	if got := list(true).Data["v"]; got != "1" {
		t.Fatalf("changing a copy changed the cache: %q", got)
	}
}

// TestSharedGetsHandOutTheCachedObject: a shared get, at "0" or the
// latest, is answered with the object the cache keeps; any other with a
// copy of its own.
func TestSharedGetsHandOutTheCachedObject(t *testing.T) {
	f := newFixture(t, nil)
	f.synced(f.create("ns", "a", nil, "1"))
	for _, rv := range []string{"0", ""} {
		get := func(shared bool) *corev1.ConfigMap {
			t.Helper()
			obj, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{ResourceVersion: rv, Shared: shared})
			if err != nil {
				t.Fatalf("get at %q: %v", rv, err)
			}
			return obj.(*corev1.ConfigMap)
		}
		if first, again := get(true), get(true); first != again {
			t.Fatalf("two shared gets at %q returned different objects, want the one the cache keeps", rv)
		}
		copied := get(false)
		if copied == get(true) {
			t.Fatalf("a get at %q that is not shared returned the cached object", rv)
		}
		copied.Data["v"] = "changed"
		if got := get(true).Data["v"]; got != "1" {
			t.Fatalf("changing a copy changed the cache: %q", got)
		}
	}
}

func TestSharedWatchesHandOutTheCachedObjects(t *testing.T) {
	f := newFixture(t, nil)
	f.synced(f.create("ns", "a", nil, "1"))
	prefix := f.keys.Prefix()
	shared := []watch.Interface{
		f.watch(prefix, storage.WatchOptions{ResourceVersion: "0", Shared: true}),
		f.watch(prefix, storage.WatchOptions{ResourceVersion: "0", Shared: true}),
	}
	private := f.watch(prefix, storage.WatchOptions{ResourceVersion: "0"})
	for _, w := range append(shared, private) {
		next(t, w) // the ADDED of the state
	}
	f.update("ns", "a", nil, "2")
	first, again := next(t, shared[0]).Object, next(t, shared[1]).Object
	if first != again {
		t.Fatal("two shared watches got different objects for one change, want the one the cache keeps")
	}
	copied := next(t, private).Object.(*corev1.ConfigMap)
	if copied == first.(*corev1.ConfigMap) {
		t.Fatal("a watch that is not shared got the cached object")
	}
	copied.Data["v"] = "changed"
	res, err := f.cacher.List(f.ctx, prefix, storage.ListOptions{ResourceVersion: "0", Shared: true})
	if err != nil || len(res.Items) != 1 {
		t.Fatalf("list: %v, %d items", err, len(res.Items))
	}
	if res.Items[0] != first {
		t.Fatal("the shared watches' object is not the one the cache keeps")
	}
	if got := res.Items[0].(*corev1.ConfigMap).Data["v"]; got != "2" {
		t.Fatalf("changing a watch's copy changed the cache: %q", got)
	}
}

// A consistent get is served from memory once the cache has caught up
// with etcd, also for a resource idle while etcd moved on, and sees a
// write made just before it.
func TestConsistentGetIsServedFromMemory(t *testing.T) {
	f := newFixture(t, nil)
	f.synced(f.create("ns", "a", nil, ""))
	f.bumpEtcd()
	before := f.store.gets.Load()
	obj, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{})
	if err != nil {
		t.Fatalf("consistent get: %v", err)
	}
	if obj.(*corev1.ConfigMap).Name != "a" {
		t.Fatalf("consistent get = %v, want a", obj)
	}
	if _, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "missing"), storage.GetOptions{}); !storage.IsNotFound(err) {
		t.Fatalf("consistent get of a missing object: %v, want not found", err)
	}
	if n := f.store.gets.Load() - before; n != 0 {
		t.Fatalf("consistent gets went to etcd %d times, want them served from the cache", n)
	}
	// The cache learns of a write only from its watch, which the read
	// must wait for.
	rv := f.create("ns", "b", nil, "")
	obj, err = f.cacher.Get(f.ctx, f.keys.Object("ns", "b"), storage.GetOptions{})
	if err != nil {
		t.Fatalf("consistent get after a write: %v", err)
	}
	if got := obj.(*corev1.ConfigMap).ResourceVersion; got != strconv.FormatInt(rv, 10) {
		t.Fatalf("consistent get after a write at %d: resourceVersion %s", rv, got)
	}
}

// TestConsistentReadsOfABusyResourceWaitForItsEvents: reads that wait for
// the cache of a resource being written wait for its next events rather
// than ask etcd for progress notifications, which every watch on the
// stream answers.
func TestConsistentReadsOfABusyResourceWaitForItsEvents(t *testing.T) {
	const interval = 10 * time.Millisecond
	f := newFixture(t, nil, cacher.WithProgressRequestInterval(interval))
	f.synced(f.create("ns", "a", nil, "0"))
	ctx, stop := context.WithCancel(f.ctx)
	var wg sync.WaitGroup
	failed := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				_, err := f.cacher.GuaranteedUpdate(ctx, f.keys.Object("ns", "a"), nil, func(existing runtime.Object) (runtime.Object, error) {
					cm := existing.(*corev1.ConfigMap)
					cm.Data = map[string]string{"v": fmt.Sprint(w, "-", i)}
					return cm, nil
				})
				if err != nil && ctx.Err() == nil {
					failed <- err
					return
				}
			}
		})
	}
	// Each write is a revision the cache is behind by, for the few
	// milliseconds its event takes: most reads have to wait.
	const readers, reads = 8, 100
	before := f.store.progress.Load()
	start := time.Now()
	var rg sync.WaitGroup
	readFailed := make(chan error, readers)
	for range readers {
		rg.Go(func() {
			for range reads {
				if _, err := f.cacher.Get(f.ctx, f.keys.Object("ns", "a"), storage.GetOptions{}); err != nil {
					readFailed <- err
					return
				}
			}
		})
	}
	rg.Wait()
	elapsed := time.Since(start)
	stop()
	wg.Wait()
	close(failed)
	close(readFailed)
	for err := range failed {
		t.Fatalf("update: %v", err)
	}
	for err := range readFailed {
		t.Fatalf("consistent get: %v", err)
	}
	// Reads that wait for events ask only in an interval that had none:
	// none at all here on a quiet machine, but a busy one pauses the
	// writers now and then (10 requests in about a second under make
	// test). The bound is by time so that those pauses cannot fail the
	// test: reads that each asked at once, without the cache's one
	// request per interval, asked 18 and 25 times in 0.2 s, against a
	// bound of 11.
	asked := f.store.progress.Load() - before
	limit := int64(elapsed/interval)/2 + 1
	t.Logf("%d consistent gets in %v asked for progress %d times", readers*reads, elapsed, asked)
	if asked > limit {
		t.Fatalf("%d consistent gets of a resource being written asked for progress %d times in %v, want at most %d (half its %v intervals)", readers*reads, asked, elapsed, limit, interval)
	}
}
