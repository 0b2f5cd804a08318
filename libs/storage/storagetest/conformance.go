package storagetest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"kplane.dev/libs/storage"
)

// RunConformance runs the whole suite, linearizability check included.
// newFixture is called once per test and must return a store with no
// objects below its keys' prefix.
func RunConformance(t *testing.T, newFixture func(t *testing.T) Fixture) {
	tests := []struct {
		name string
		run  func(e *env)
	}{
		{"Create", testCreate},
		{"Get", testGet},
		{"StoredWithoutResourceVersion", testStoredWithoutResourceVersion},
		{"ListConsistent", testListConsistent},
		{"ListResourceVersions", testListResourceVersions},
		{"ListPaging", testListPaging},
		{"ListPagingFiltered", testListPagingFiltered},
		{"ListPagingCompacted", testListPagingCompacted},
		{"ListSelectors", testListSelectors},
		{"NamespaceIsolation", testNamespaceIsolation},
		{"GuaranteedUpdate", testGuaranteedUpdate},
		{"GuaranteedUpdateRetries", testGuaranteedUpdateRetries},
		{"GuaranteedUpdateNoOp", testGuaranteedUpdateNoOp},
		{"UpdatePreconditions", testUpdatePreconditions},
		{"UpdateStaleResourceVersion", testUpdateStaleResourceVersion},
		{"Delete", testDelete},
		{"DeletePreconditions", testDeletePreconditions},
		{"WatchFromResourceVersion", testWatchFromResourceVersion},
		{"WatchFromNow", testWatchFromNow},
		{"WatchCompacted", testWatchCompacted},
		{"WatchSelectors", testWatchSelectors},
		{"WatchBookmarks", testWatchBookmarks},
		{"WatchSendInitialEvents", testWatchSendInitialEvents},
		{"WatchStop", testWatchStop},
		{"Compaction", testCompaction},
		{"Linearizable", testLinearizable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(newEnv(t, newFixture)) })
	}
}

func testCreate(e *env) {
	in := e.object("ns", "a", nil, "v1")
	out, err := e.f.Store.Create(e.ctx, e.key("ns", "a"), in)
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	if rv := accessor(e.t, in).GetResourceVersion(); rv != "" {
		e.t.Errorf("create set resourceVersion %q on its input", rv)
	}
	if got, want := rvOf(e.t, out), e.etcdRev(); got != want {
		e.t.Errorf("created resourceVersion = %d, want etcd's revision %d", got, want)
	}
	if valueOf(e.t, out) != "v1" {
		e.t.Errorf("created object lost its content: %v", out)
	}
	_, err = e.f.Store.Create(e.ctx, e.key("ns", "a"), e.object("ns", "a", nil, "v2"))
	wantCode(e.t, err, storage.ErrCodeKeyExists, "create on a taken key")
	if got := valueOf(e.t, e.get("ns", "a")); got != "v1" {
		e.t.Errorf("failed create overwrote the object: value %q", got)
	}
}

func testGet(e *env) {
	_, err := e.f.Store.Get(e.ctx, e.key("ns", "missing"), storage.GetOptions{})
	wantCode(e.t, err, storage.ErrCodeKeyNotFound, "get of a missing key")
	created := e.create("ns", "a", nil, "v1")
	for _, rv := range []string{"", "0", accessor(e.t, created).GetResourceVersion()} {
		e.t.Run("rv="+rv, func(t *testing.T) {
			got, err := e.f.Store.Get(e.ctx, e.key("ns", "a"), storage.GetOptions{ResourceVersion: rv})
			if err != nil {
				t.Fatalf("get: %v", err)
			}
			if rvOf(t, got) != rvOf(t, created) || valueOf(t, got) != "v1" {
				t.Fatalf("get = rv %d value %q, want rv %d value v1", rvOf(t, got), valueOf(t, got), rvOf(t, created))
			}
		})
	}
	_, err = e.f.Store.Get(e.ctx, e.key("ns", "a"), storage.GetOptions{ResourceVersion: strconv.FormatInt(e.etcdRev()+1000, 10)})
	wantCode(e.t, err, storage.ErrCodeTooLargeResourceVersion, "get at a future resourceVersion")
}

func testStoredWithoutResourceVersion(e *env) {
	e.create("ns", "a", nil, "v1")
	e.set("ns", "a", nil, "v2")
	resp, err := e.f.Client.Get(e.ctx, e.key("ns", "a"))
	if err != nil || len(resp.Kvs) != 1 {
		e.t.Fatalf("read raw key: %v, %d kvs", err, len(resp.Kvs))
	}
	obj, err := e.f.Objects.Decode(resp.Kvs[0].Value)
	if err != nil {
		e.t.Fatalf("decode stored bytes: %v", err)
	}
	if rv := accessor(e.t, obj).GetResourceVersion(); rv != "" {
		e.t.Fatalf("stored object carries resourceVersion %q, want none", rv)
	}
}

// A list with no resourceVersion must see every write etcd acknowledged
// before it, even one that bypassed the store.
func testListConsistent(e *env) {
	e.create("ns", "a", nil, "v1")
	raw := e.object("ns", "b", nil, "raw")
	data, err := e.f.Objects.Encode(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	put, err := e.f.Client.Put(e.ctx, e.key("ns", "b"), string(data))
	if err != nil {
		e.t.Fatal(err)
	}
	res := e.list(e.f.Keys.Prefix(), storage.ListOptions{})
	if got := names(e.t, res.Items); !slices.Equal(got, []string{"a", "b"}) {
		e.t.Fatalf("list = %v, want [a b]", got)
	}
	if res.ResourceVersion < put.Header.Revision {
		e.t.Fatalf("list resourceVersion %d is older than the write at %d", res.ResourceVersion, put.Header.Revision)
	}
	if got := rvOf(e.t, res.Items[1]); got != put.Header.Revision {
		e.t.Fatalf("item resourceVersion = %d, want its mod revision %d", got, put.Header.Revision)
	}
}

func testListResourceVersions(e *env) {
	first := rvOf(e.t, e.create("ns", "a", nil, "v1"))
	e.create("ns", "b", nil, "v1")
	e.set("ns", "a", nil, "v2")
	latest := e.etcdRev()
	prefix := e.f.Keys.NamespacePrefix("ns")
	cases := []struct {
		name      string
		opts      storage.ListOptions
		wantNames []string
		wantValue string // of a
		wantRV    int64  // 0: at least latest
		wantCode  storage.ErrorCode
	}{
		{name: "consistent", opts: storage.ListOptions{}, wantNames: []string{"a", "b"}, wantValue: "v2"},
		{name: "not older than", opts: storage.ListOptions{ResourceVersion: strconv.FormatInt(first, 10), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}, wantNames: []string{"a", "b"}, wantValue: "v2"},
		{name: "not older than by default", opts: storage.ListOptions{ResourceVersion: strconv.FormatInt(latest, 10)}, wantNames: []string{"a", "b"}, wantValue: "v2"},
		{name: "exact", opts: storage.ListOptions{ResourceVersion: strconv.FormatInt(first, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact}, wantNames: []string{"a"}, wantValue: "v1", wantRV: first},
		{name: "too large", opts: storage.ListOptions{ResourceVersion: strconv.FormatInt(latest+1000, 10)}, wantCode: storage.ErrCodeTooLargeResourceVersion},
		{name: "exact zero", opts: storage.ListOptions{ResourceVersion: "0", ResourceVersionMatch: metav1.ResourceVersionMatchExact}, wantCode: storage.ErrCodeInvalidRequest},
		{name: "not a number", opts: storage.ListOptions{ResourceVersion: "abc"}, wantCode: storage.ErrCodeInvalidRequest},
	}
	for _, tc := range cases {
		e.t.Run(tc.name, func(t *testing.T) {
			res, err := e.f.Store.List(e.ctx, prefix, tc.opts)
			if tc.wantCode != 0 {
				wantCode(t, err, tc.wantCode, "list")
				return
			}
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if got := names(t, res.Items); !slices.Equal(got, tc.wantNames) {
				t.Fatalf("list = %v, want %v", got, tc.wantNames)
			}
			if got := valueOf(t, res.Items[0]); got != tc.wantValue {
				t.Fatalf("a = %q, want %q", got, tc.wantValue)
			}
			if tc.wantRV != 0 && res.ResourceVersion != tc.wantRV || tc.wantRV == 0 && res.ResourceVersion < latest {
				t.Fatalf("list resourceVersion = %d, want %d (0: at least %d)", res.ResourceVersion, tc.wantRV, latest)
			}
		})
	}
	// rv=0 may be served from a cache that lags, but never from the future.
	res := e.list(prefix, storage.ListOptions{ResourceVersion: "0"})
	for _, it := range res.Items {
		if rvOf(e.t, it) > res.ResourceVersion {
			e.t.Fatalf("rv=0 list at %d holds an item at %d", res.ResourceVersion, rvOf(e.t, it))
		}
	}
	e.compact(latest)
	_, err := e.f.Store.List(e.ctx, prefix, storage.ListOptions{ResourceVersion: strconv.FormatInt(first, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	wantCode(e.t, err, storage.ErrCodeExpired, "exact list at a compacted revision")
}

func testListPaging(e *env) {
	for i := range 10 {
		e.create("ns", fmt.Sprintf("o%02d", i), nil, "v")
	}
	var got []string
	var pageRV int64
	opts := storage.ListOptions{Limit: 3}
	for page := 0; ; page++ {
		res := e.list(e.f.Keys.Prefix(), opts)
		got = append(got, names(e.t, res.Items)...)
		if page == 0 {
			pageRV = res.ResourceVersion
			// Writes after the first page must not show in later pages.
			e.create("ns", "o05a", nil, "late")
			e.delete("ns", "o09")
		} else if res.ResourceVersion != pageRV {
			e.t.Fatalf("page %d resourceVersion = %d, want the first page's %d", page, res.ResourceVersion, pageRV)
		}
		remaining := 10 - len(got)
		if res.Continue == "" {
			if remaining != 0 {
				e.t.Fatalf("list ended after %v", got)
			}
			if res.RemainingItemCount != nil {
				e.t.Fatalf("last page has remainingItemCount %d", *res.RemainingItemCount)
			}
			break
		}
		if len(res.Items) != 3 {
			e.t.Fatalf("page %d holds %d items, want 3", page, len(res.Items))
		}
		if res.RemainingItemCount == nil || *res.RemainingItemCount != int64(remaining) {
			e.t.Fatalf("page %d remainingItemCount = %v, want %d", page, res.RemainingItemCount, remaining)
		}
		checkToken(e.t, res.Continue, pageRV)
		opts.Continue = res.Continue
	}
	want := []string{"o00", "o01", "o02", "o03", "o04", "o05", "o06", "o07", "o08", "o09"}
	if !slices.Equal(got, want) {
		e.t.Fatalf("paged list = %v, want %v", got, want)
	}

	e.t.Run("bad tokens", func(t *testing.T) {
		for _, token := range []string{"!!", base64.RawURLEncoding.EncodeToString([]byte(`{"v":"x","rv":1,"start":"a"}`)),
			base64.RawURLEncoding.EncodeToString([]byte(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../other"}`))} {
			_, err := e.f.Store.List(e.ctx, e.f.Keys.Prefix(), storage.ListOptions{Limit: 3, Continue: token})
			wantCode(t, err, storage.ErrCodeInvalidRequest, "list with token "+token)
		}
		first := e.list(e.f.Keys.Prefix(), storage.ListOptions{Limit: 3})
		_, err := e.f.Store.List(e.ctx, e.f.Keys.Prefix(), storage.ListOptions{Limit: 3, Continue: first.Continue, ResourceVersion: "5"})
		wantCode(t, err, storage.ErrCodeInvalidRequest, "list with both continue and resourceVersion")
	})
}

// checkToken decodes a continue token as kube-apiserver's clients may:
// base64 JSON bound to the list's revision.
func checkToken(t *testing.T, token string, rv int64) {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		t.Fatalf("continue token %q is not base64: %v", token, err)
	}
	var c struct {
		V     string `json:"v"`
		RV    int64  `json:"rv"`
		Start string `json:"start"`
	}
	if err := json.Unmarshal(data, &c); err != nil || c.V != "meta.k8s.io/v1" || c.RV != rv || c.Start == "" {
		t.Fatalf("continue token %s = %+v (%v), want v meta.k8s.io/v1, rv %d and a start key", data, c, err, rv)
	}
}

// A selector that filters most objects out still fills every page but the
// last, and the count of remaining items is unknown.
func testListPagingFiltered(e *env) {
	var want []string
	for i := range 40 {
		l := map[string]string{"keep": "no"}
		if i%5 == 0 {
			l["keep"] = "yes"
			want = append(want, fmt.Sprintf("o%02d", i))
		}
		e.create("ns", fmt.Sprintf("o%02d", i), l, "v")
	}
	pred := storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"keep": "yes"})}
	var got []string
	opts := storage.ListOptions{Limit: 3, Predicate: pred}
	for {
		res := e.list(e.f.Keys.Prefix(), opts)
		got = append(got, names(e.t, res.Items)...)
		if res.RemainingItemCount != nil {
			e.t.Fatalf("filtered page has remainingItemCount %d", *res.RemainingItemCount)
		}
		if res.Continue == "" {
			break
		}
		if len(res.Items) != 3 {
			e.t.Fatalf("filtered page holds %v, want 3 items", names(e.t, res.Items))
		}
		opts.Continue = res.Continue
	}
	if !slices.Equal(got, want) {
		e.t.Fatalf("filtered paged list = %v, want %v", got, want)
	}
}

func testListPagingCompacted(e *env) {
	for i := range 3 {
		e.create("ns", fmt.Sprintf("o%d", i), nil, "v")
	}
	first := e.list(e.f.Keys.Prefix(), storage.ListOptions{Limit: 1})
	e.set("ns", "o0", nil, "v2")
	e.compact(e.etcdRev())
	_, err := e.f.Store.List(e.ctx, e.f.Keys.Prefix(), storage.ListOptions{Limit: 1, Continue: first.Continue})
	wantCode(e.t, err, storage.ErrCodeExpired, "continue a list whose revision was compacted")
}

func testListSelectors(e *env) {
	e.create("ns1", "a", map[string]string{"app": "web", "tier": "front"}, "v")
	e.create("ns1", "b", map[string]string{"app": "web", "tier": "back"}, "v")
	e.create("ns2", "a", map[string]string{"app": "db"}, "v")
	e.create("ns2", "c", nil, "v")
	parse := func(s string) labels.Selector {
		sel, err := labels.Parse(s)
		if err != nil {
			e.t.Fatal(err)
		}
		return sel
	}
	cases := []struct {
		name  string
		pred  storage.SelectionPredicate
		limit int64
		want  []string // namespace/name
	}{
		{name: "label equality", pred: storage.SelectionPredicate{Label: parse("app=web")}, want: []string{"ns1/a", "ns1/b"}},
		{name: "label set", pred: storage.SelectionPredicate{Label: parse("app in (db,web),tier!=back")}, want: []string{"ns1/a", "ns2/a"}},
		{name: "label absent", pred: storage.SelectionPredicate{Label: parse("!app")}, want: []string{"ns2/c"}},
		{name: "field name", pred: storage.SelectionPredicate{Field: fields.OneTermEqualSelector("metadata.name", "a")}, want: []string{"ns1/a", "ns2/a"}},
		{name: "field namespace", pred: storage.SelectionPredicate{Field: fields.OneTermNotEqualSelector("metadata.namespace", "ns1")}, want: []string{"ns2/a", "ns2/c"}},
		{name: "label and field", pred: storage.SelectionPredicate{Label: parse("app"), Field: fields.OneTermEqualSelector("metadata.name", "a")}, want: []string{"ns1/a", "ns2/a"}},
		{name: "label with limit", pred: storage.SelectionPredicate{Label: parse("app")}, limit: 2, want: []string{"ns1/a", "ns1/b"}},
	}
	for _, tc := range cases {
		e.t.Run(tc.name, func(t *testing.T) {
			res := e.list(e.f.Keys.Prefix(), storage.ListOptions{Predicate: tc.pred, Limit: tc.limit})
			var got []string
			for _, it := range res.Items {
				m := accessor(t, it)
				got = append(got, m.GetNamespace()+"/"+m.GetName())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("list = %v, want %v", got, tc.want)
			}
		})
	}
}

func testNamespaceIsolation(e *env) {
	w := e.watch(e.f.Keys.NamespacePrefix("ns1"), storage.WatchOptions{ResourceVersion: strconv.FormatInt(e.etcdRev(), 10)})
	e.create("ns10", "a", nil, "v")
	e.create("ns1", "b", nil, "v")
	res := e.list(e.f.Keys.NamespacePrefix("ns1"), storage.ListOptions{})
	if got := names(e.t, res.Items); !slices.Equal(got, []string{"b"}) {
		e.t.Fatalf("list ns1 = %v, want [b]", got)
	}
	expectEvents(e.t, w, wantEvent{typ: watch.Added, name: "b", value: "v"})
	_, err := e.f.Store.List(e.ctx, e.f.Keys.Prefix()+"ns1", storage.ListOptions{})
	wantCode(e.t, err, storage.ErrCodeInvalidRequest, "list of a prefix without a trailing slash")
}

func testGuaranteedUpdate(e *env) {
	_, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "missing"), nil, func(o runtime.Object) (runtime.Object, error) { return o, nil })
	wantCode(e.t, err, storage.ErrCodeKeyNotFound, "update of a missing key")

	created := e.create("ns", "a", nil, "v1")
	updated := e.set("ns", "a", map[string]string{"x": "y"}, "v2")
	if got, want := rvOf(e.t, updated), e.etcdRev(); got != want || got <= rvOf(e.t, created) {
		e.t.Fatalf("updated resourceVersion = %d, want etcd's revision %d", got, want)
	}
	got := e.get("ns", "a")
	if valueOf(e.t, got) != "v2" || accessor(e.t, got).GetLabels()["x"] != "y" || rvOf(e.t, got) != rvOf(e.t, updated) {
		e.t.Fatalf("get after update = %v", got)
	}

	_, err = e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "a"), nil, func(runtime.Object) (runtime.Object, error) { return nil, errTryUpdate })
	if err != errTryUpdate {
		e.t.Fatalf("tryUpdate error came back as %v, want it as is", err)
	}
}

// An update whose read went stale before its write must read again and
// recompute, so the concurrent write survives.
func testGuaranteedUpdateRetries(e *env) {
	e.create("ns", "a", nil, "v1")
	calls := 0
	out, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "a"), nil, func(existing runtime.Object) (runtime.Object, error) {
		calls++
		if calls == 1 {
			e.set("ns", "a", map[string]string{"concurrent": "yes"}, "v2")
		}
		m := accessor(e.t, existing)
		ann := m.GetAnnotations()
		ann[valueKey] += "+mine"
		m.SetAnnotations(ann)
		return existing, nil
	})
	if err != nil {
		e.t.Fatalf("update: %v", err)
	}
	if calls != 2 {
		e.t.Fatalf("tryUpdate called %d times, want 2", calls)
	}
	if valueOf(e.t, out) != "v2+mine" || accessor(e.t, out).GetLabels()["concurrent"] != "yes" {
		e.t.Fatalf("update lost the concurrent write: %v", out)
	}
}

func testGuaranteedUpdateNoOp(e *env) {
	created := e.create("ns", "a", nil, "v1")
	before := e.etcdRev()
	out, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "a"), nil, func(existing runtime.Object) (runtime.Object, error) {
		return existing, nil
	})
	if err != nil {
		e.t.Fatalf("no-op update: %v", err)
	}
	if rvOf(e.t, out) != rvOf(e.t, created) {
		e.t.Fatalf("no-op update moved resourceVersion %d -> %d", rvOf(e.t, created), rvOf(e.t, out))
	}
	if after := e.etcdRev(); after != before {
		e.t.Fatalf("no-op update wrote to etcd: revision %d -> %d", before, after)
	}
}

func testUpdatePreconditions(e *env) {
	created := e.create("ns", "a", nil, "v1")
	// A revision the object never had: a cache that has not yet seen the
	// UID set may start the update from the created state, and a
	// precondition on that state's revision would pass there first (the
	// write then fails and is retried from etcd, as kube's store does).
	staleRV := strconv.FormatInt(rvOf(e.t, created)-1, 10)
	uid := types.UID("uid-1")
	created = e.setUID("ns", "a", uid)
	rv := accessor(e.t, created).GetResourceVersion()
	otherUID := types.UID("uid-2")
	cases := []struct {
		name string
		pre  storage.Preconditions
		ok   bool
	}{
		{name: "uid mismatch", pre: storage.Preconditions{UID: &otherUID}},
		{name: "resourceVersion mismatch", pre: storage.Preconditions{ResourceVersion: &staleRV}},
		{name: "both match", pre: storage.Preconditions{UID: &uid, ResourceVersion: &rv}, ok: true},
	}
	for _, tc := range cases {
		e.t.Run(tc.name, func(t *testing.T) {
			called := false
			_, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "a"), &tc.pre, func(existing runtime.Object) (runtime.Object, error) {
				called = true
				m := accessor(t, existing)
				m.SetAnnotations(map[string]string{valueKey: "changed"})
				return existing, nil
			})
			if tc.ok {
				if err != nil || !called {
					t.Fatalf("update with matching preconditions: err %v, tryUpdate called %v", err, called)
				}
				return
			}
			wantCode(t, err, storage.ErrCodeInvalidObj, "update with a failing precondition")
			if called {
				t.Fatal("tryUpdate ran although a precondition failed")
			}
		})
	}
}

func (e *env) setUID(ns, name string, uid types.UID) runtime.Object {
	e.t.Helper()
	out, err := e.f.Store.GuaranteedUpdate(e.ctx, e.key(ns, name), nil, func(existing runtime.Object) (runtime.Object, error) {
		accessor(e.t, existing).SetUID(uid)
		return existing, nil
	})
	if err != nil {
		e.t.Fatalf("set uid: %v", err)
	}
	return out
}

// An update carrying the resourceVersion its client read (PUT) conflicts
// once someone else wrote, and succeeds with the fresh one.
func testUpdateStaleResourceVersion(e *env) {
	read := e.create("ns", "a", nil, "v1")
	e.set("ns", "a", nil, "v2")
	put := func(rv string) (runtime.Object, error) {
		return e.f.Store.GuaranteedUpdate(e.ctx, e.key("ns", "a"), nil, func(existing runtime.Object) (runtime.Object, error) {
			if cur := accessor(e.t, existing).GetResourceVersion(); cur != rv {
				return nil, conflict(e.key("ns", "a"), rv, cur)
			}
			accessor(e.t, existing).SetAnnotations(map[string]string{valueKey: "put"})
			return existing, nil
		})
	}
	_, err := put(accessor(e.t, read).GetResourceVersion())
	wantCode(e.t, err, storage.ErrCodeResourceVersionConflicts, "update with a stale resourceVersion")
	if got := valueOf(e.t, e.get("ns", "a")); got != "v2" {
		e.t.Fatalf("stale update wrote: value %q", got)
	}
	if _, err := put(accessor(e.t, e.get("ns", "a")).GetResourceVersion()); err != nil {
		e.t.Fatalf("update with the fresh resourceVersion: %v", err)
	}
}

func testDelete(e *env) {
	_, err := e.f.Store.Delete(e.ctx, e.key("ns", "missing"), nil, nil)
	wantCode(e.t, err, storage.ErrCodeKeyNotFound, "delete of a missing key")
	e.create("ns", "a", nil, "v1")
	e.set("ns", "a", nil, "v2")

	var validated runtime.Object
	out, err := e.f.Store.Delete(e.ctx, e.key("ns", "a"), nil, func(_ context.Context, existing runtime.Object) error {
		validated = existing
		return nil
	})
	if err != nil {
		e.t.Fatalf("delete: %v", err)
	}
	if validated == nil || valueOf(e.t, validated) != "v2" {
		e.t.Fatalf("validate saw %v, want the stored object", validated)
	}
	if got, want := rvOf(e.t, out), e.etcdRev(); got != want {
		e.t.Fatalf("deleted object resourceVersion = %d, want the deletion revision %d", got, want)
	}
	if valueOf(e.t, out) != "v2" {
		e.t.Fatalf("deleted object = %v, want the last state", out)
	}
	_, err = e.f.Store.Get(e.ctx, e.key("ns", "a"), storage.GetOptions{})
	wantCode(e.t, err, storage.ErrCodeKeyNotFound, "get after delete")
	_, err = e.f.Store.Delete(e.ctx, e.key("ns", "a"), nil, nil)
	wantCode(e.t, err, storage.ErrCodeKeyNotFound, "second delete")
}

func testDeletePreconditions(e *env) {
	e.create("ns", "a", nil, "v1")
	uid := types.UID("uid-1")
	cur := e.setUID("ns", "a", uid)
	rv := accessor(e.t, cur).GetResourceVersion()
	otherUID, staleRV := types.UID("uid-2"), strconv.FormatInt(rvOf(e.t, cur)-1, 10)
	cases := []struct {
		name     string
		pre      *storage.Preconditions
		validate storage.ValidateDeletionFunc
		check    func(t *testing.T, err error)
	}{
		{name: "uid mismatch", pre: &storage.Preconditions{UID: &otherUID}, check: func(t *testing.T, err error) {
			wantCode(t, err, storage.ErrCodeInvalidObj, "delete with a failing uid precondition")
		}},
		{name: "resourceVersion mismatch", pre: &storage.Preconditions{ResourceVersion: &staleRV}, check: func(t *testing.T, err error) {
			wantCode(t, err, storage.ErrCodeInvalidObj, "delete with a failing resourceVersion precondition")
		}},
		{name: "validate refuses", validate: func(context.Context, runtime.Object) error { return errTryUpdate }, check: func(t *testing.T, err error) {
			if err != errTryUpdate {
				t.Fatalf("validate error came back as %v, want it as is", err)
			}
		}},
	}
	for _, tc := range cases {
		e.t.Run(tc.name, func(t *testing.T) {
			_, err := e.f.Store.Delete(e.ctx, e.key("ns", "a"), tc.pre, tc.validate)
			tc.check(t, err)
			if got := rvOf(t, e.get("ns", "a")); got != rvOf(t, cur) {
				t.Fatalf("refused delete changed the object: rv %d", got)
			}
		})
	}
	if _, err := e.f.Store.Delete(e.ctx, e.key("ns", "a"), &storage.Preconditions{UID: &uid, ResourceVersion: &rv}, nil); err != nil {
		e.t.Fatalf("delete with matching preconditions: %v", err)
	}
}

func testWatchFromResourceVersion(e *env) {
	start := rvOf(e.t, e.create("ns", "before", nil, "v"))
	w := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(start, 10)})
	c := rvOf(e.t, e.create("ns", "a", nil, "v1"))
	u := rvOf(e.t, e.set("ns", "a", nil, "v2"))
	d := rvOf(e.t, e.delete("ns", "a"))
	expectEvents(e.t, w,
		wantEvent{typ: watch.Added, name: "a", rv: c, value: "v1"},
		wantEvent{typ: watch.Modified, name: "a", rv: u, value: "v2"},
		wantEvent{typ: watch.Deleted, name: "a", rv: d, value: "v2"},
	)
	// Starting at an older revision replays what followed it.
	w2 := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(c, 10)})
	expectEvents(e.t, w2,
		wantEvent{typ: watch.Modified, name: "a", rv: u, value: "v2"},
		wantEvent{typ: watch.Deleted, name: "a", rv: d, value: "v2"},
	)
}

func testWatchFromNow(e *env) {
	for _, rv := range []string{"", "0"} {
		e.t.Run("rv="+rv, func(t *testing.T) {
			e := &env{t: t, f: e.f, ctx: e.ctx}
			ns := "ns" + rv
			e.create(ns, "a", nil, "v1")
			e.create(ns, "b", nil, "v1")
			w := e.watch(e.f.Keys.NamespacePrefix(ns), storage.WatchOptions{ResourceVersion: rv})
			e.set(ns, "a", nil, "v2")
			expectEvents(t, w,
				wantEvent{typ: watch.Added, name: "a", value: "v1"},
				wantEvent{typ: watch.Added, name: "b", value: "v1"},
				wantEvent{typ: watch.Modified, name: "a", value: "v2"},
			)
		})
	}
}

func testWatchCompacted(e *env) {
	old := rvOf(e.t, e.create("ns", "a", nil, "v1"))
	e.set("ns", "a", nil, "v2")
	e.set("ns", "a", nil, "v3")
	compacted := e.etcdRev()
	e.compact(compacted)
	w := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(old, 10)})
	ev := next(e.t, w)
	st, ok := ev.Object.(*metav1.Status)
	if ev.Type != watch.Error || !ok {
		e.t.Fatalf("got %s %T, want an ERROR event with a Status", ev.Type, ev.Object)
	}
	want := fmt.Sprintf("too old resource version: %d (", old)
	if st.Code != 410 || st.Reason != metav1.StatusReasonExpired || len(st.Message) < len(want) || st.Message[:len(want)] != want {
		e.t.Fatalf("status = %d %s %q, want 410 Expired %q...", st.Code, st.Reason, st.Message, want)
	}
	expectClosed(e.t, w)
}

func testWatchSelectors(e *env) {
	cases := []struct {
		name string
		pred storage.SelectionPredicate
	}{
		{name: "label", pred: storage.SelectionPredicate{Label: labels.SelectorFromSet(labels.Set{"app": "web"})}},
		{name: "field", pred: storage.SelectionPredicate{Field: fields.OneTermNotEqualSelector("metadata.name", "b")}},
	}
	for _, tc := range cases {
		e.t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, f: e.f, ctx: e.ctx}
			ns := tc.name
			e.create(ns, "a", map[string]string{"app": "web"}, "v1")
			e.create(ns, "b", map[string]string{"app": "db"}, "v1")
			w := e.watch(e.f.Keys.NamespacePrefix(ns), storage.WatchOptions{ResourceVersion: "0", Predicate: tc.pred})
			expectEvents(t, w, wantEvent{typ: watch.Added, name: "a", value: "v1"})
			e.set(ns, "b", map[string]string{"app": "db"}, "v2")
			if tc.name == "label" {
				// Leaving the selection is a DELETED of the last matching
				// state at the revision that ended it; entering is ADDED.
				stop := rvOf(t, e.set(ns, "a", map[string]string{"app": "off"}, "off"))
				start := rvOf(t, e.set(ns, "a", map[string]string{"app": "web"}, "on"))
				expectEvents(t, w,
					wantEvent{typ: watch.Deleted, name: "a", rv: stop, value: "v1"},
					wantEvent{typ: watch.Added, name: "a", rv: start, value: "on"},
				)
			}
			e.expectNoChangeBefore(w, ns, "marker", map[string]string{"app": "web"})
		})
	}
}

func testWatchBookmarks(e *env) {
	if !e.f.Bookmarks {
		e.t.Skip("the fixture does not send periodic bookmarks")
	}
	start := rvOf(e.t, e.create("ns", "a", nil, "v1"))
	w := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(start, 10), AllowBookmarks: true})
	ev := next(e.t, w)
	if ev.Type != watch.Bookmark {
		e.t.Fatalf("got %s, want a BOOKMARK", ev.Type)
	}
	m := accessor(e.t, ev.Object)
	if rvOf(e.t, ev.Object) < start || m.GetName() != "" || len(m.GetAnnotations()) != 0 || len(m.GetLabels()) != 0 {
		e.t.Fatalf("bookmark = %+v, want only a resourceVersion of at least %d", ev.Object, start)
	}
	if got, want := ev.Object.GetObjectKind().GroupVersionKind(), e.f.Objects.New().GetObjectKind().GroupVersionKind(); got != want && !got.Empty() {
		e.t.Fatalf("bookmark kind = %v, want %v", got, want)
	}
	// A watch that does not ask for bookmarks gets none.
	quiet := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(start, 10)})
	next(e.t, w) // a second bookmark: enough time passed for quiet to get one
	e.create("ns", "b", nil, "v1")
	if ev := next(e.t, quiet); ev.Type != watch.Added {
		e.t.Fatalf("watch without bookmarks got %s first", ev.Type)
	}
}

func testWatchSendInitialEvents(e *env) {
	e.create("ns", "a", nil, "v1")
	last := rvOf(e.t, e.create("ns", "b", nil, "v1"))
	yes := true
	w := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{
		ResourceVersion:      strconv.FormatInt(last, 10),
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		SendInitialEvents:    &yes,
		AllowBookmarks:       true,
	})
	expectEvents(e.t, w,
		wantEvent{typ: watch.Added, name: "a", value: "v1"},
		wantEvent{typ: watch.Added, name: "b", rv: last, value: "v1"},
	)
	ev := next(e.t, w)
	if ev.Type != watch.Bookmark || accessor(e.t, ev.Object).GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" {
		e.t.Fatalf("got %s %v, want the BOOKMARK ending the initial events", ev.Type, ev.Object)
	}
	if rv := rvOf(e.t, ev.Object); rv < last {
		e.t.Fatalf("initial events bookmark at %d, want at least %d", rv, last)
	}
	c := rvOf(e.t, e.create("ns", "c", nil, "v1"))
	expectEvents(e.t, w, wantEvent{typ: watch.Added, name: "c", rv: c, value: "v1"})
}

func testWatchStop(e *env) {
	e.t.Run("stop", func(t *testing.T) {
		w, err := e.f.Store.Watch(e.ctx, e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		w.Stop()
		expectClosedAfterDrain(t, w)
	})
	e.t.Run("context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(e.ctx)
		w, err := e.f.Store.Watch(ctx, e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: "0"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		cancel()
		expectClosedAfterDrain(t, w)
	})
}

// expectClosedAfterDrain accepts events already queued before the stop.
func expectClosedAfterDrain(t *testing.T, w watch.Interface) {
	t.Helper()
	for range w.ResultChan() {
	}
}

func testCompaction(e *env) {
	e.create("ns", "a", nil, "v1")
	e.set("ns", "a", nil, "v2")
	e.create("ns", "b", nil, "v1")
	e.compact(e.etcdRev())
	if got := valueOf(e.t, e.get("ns", "a")); got != "v2" {
		e.t.Fatalf("get after compaction = %q, want v2", got)
	}
	res := e.list(e.f.Keys.Prefix(), storage.ListOptions{})
	if got := names(e.t, res.Items); !slices.Equal(got, []string{"a", "b"}) {
		e.t.Fatalf("list after compaction = %v", got)
	}
	w := e.watch(e.f.Keys.Prefix(), storage.WatchOptions{ResourceVersion: strconv.FormatInt(res.ResourceVersion, 10)})
	u := rvOf(e.t, e.set("ns", "b", nil, "v2"))
	expectEvents(e.t, w, wantEvent{typ: watch.Modified, name: "b", rv: u, value: "v2"})
	if _, err := e.f.Store.Delete(e.ctx, e.key("ns", "a"), nil, nil); err != nil {
		e.t.Fatalf("delete after compaction: %v", err)
	}
}
