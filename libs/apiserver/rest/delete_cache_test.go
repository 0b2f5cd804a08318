package rest_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"kplane.dev/libs/apiserver/rest"
	"kplane.dev/libs/storage"
)

// behindStore is a watch cache that has not yet seen the latest writes
// of the keys held: a read that accepts any revision ("0") answers with
// the state a key had when held. It records the revision each read asked
// for.
type behindStore struct {
	storage.Interface
	mu    sync.Mutex
	held  map[string]runtime.Object
	reads []string
}

func (s *behindStore) Get(ctx context.Context, key string, opts storage.GetOptions) (runtime.Object, error) {
	s.mu.Lock()
	s.reads = append(s.reads, opts.ResourceVersion)
	held, ok := s.held[key]
	s.mu.Unlock()
	if ok && opts.ResourceVersion == "0" {
		return held.DeepCopyObject(), nil
	}
	return s.Interface.Get(ctx, key, opts)
}

// hold keeps key's current state as what the cache answers from now on.
func (s *behindStore) hold(tb testing.TB, key string) {
	tb.Helper()
	obj, err := s.Interface.Get(context.Background(), key, storage.GetOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[key] = obj
}

// takeReads returns the revisions reads asked for since the last call.
func (s *behindStore) takeReads() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	reads := s.reads
	s.reads = nil
	return reads
}

func newBehindFixture(t *testing.T, opts ...rest.Option) (*writeFixture, *behindStore) {
	t.Helper()
	var cache *behindStore
	f := newWrappedFixture(t, func(s storage.Interface) storage.Interface {
		if cache == nil {
			// configmaps come first.
			cache = &behindStore{Interface: s, held: map[string]runtime.Object{}}
			return cache
		}
		return s
	}, opts...)
	return f, cache
}

// TestDeleteFromCache: a delete is decided on the watch cache's state
// without reading etcd, and decided again on the latest state whenever
// that could change the outcome.
func TestDeleteFromCache(t *testing.T) {
	deny := false
	log := &admissionLog{}
	f, cache := newBehindFixture(t, rest.WithAdmission(validator{log: log, fn: func(a *rest.Attributes) error {
		m, _ := meta.Accessor(a.OldObject)
		if deny && a.Operation == rest.Delete && m.GetLabels()["keep"] == "true" {
			return apierrors.NewForbidden(a.Resource.GroupResource(), a.Name, errors.New("kept"))
		}
		return nil
	}}))
	key := func(name string) string { return f.keys["configmaps"].Object("ns", name) }

	t.Run("a current cache is all a delete reads", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"a"}}`)
		cache.takeReads()
		if r := f.do(t, http.MethodDelete, cms+"/a", "", ""); r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		if got := cache.takeReads(); !slices.Equal(got, []string{"0"}) {
			t.Errorf("reads at resourceVersions %q, want only the cache's (\"0\")", got)
		}
		if f.stored(t, "configmaps", "ns", "a") != nil {
			t.Error("a is still stored")
		}
	})

	t.Run("a finalizer added since the cache's state is waited for", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"b"}}`)
		cache.hold(t, key("b"))
		if r := f.do(t, http.MethodPut, cms+"/b", "", `{"metadata":{"name":"b","finalizers":["example.com/x"]}}`); r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		r := f.do(t, http.MethodDelete, cms+"/b", "", "")
		if r.code != http.StatusOK || r.meta(t).GetDeletionTimestamp() == nil {
			t.Fatalf("code %d, want 200 with a deletionTimestamp: %s", r.code, r.body)
		}
		stored := f.stored(t, "configmaps", "ns", "b")
		if stored == nil || stored.GetDeletionTimestamp() == nil || !slices.Equal(stored.GetFinalizers(), []string{"example.com/x"}) {
			t.Fatalf("stored %v, want b waiting for its finalizer", stored)
		}
	})

	t.Run("a precondition on an object recreated since holds", func(t *testing.T) {
		f.create(t, cms, `{"metadata":{"name":"c"}}`)
		cache.hold(t, key("c"))
		if r := f.do(t, http.MethodDelete, cms+"/c", "", ""); r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		uid := f.create(t, cms, `{"metadata":{"name":"c"}}`).meta(t).GetUID()
		body := `{"kind":"DeleteOptions","apiVersion":"v1","preconditions":{"uid":"` + string(uid) + `"}}`
		if r := f.do(t, http.MethodDelete, cms+"/c", "", body); r.code != http.StatusOK || r.meta(t).GetUID() != uid {
			t.Fatalf("code %d, want the recreated c deleted: %s", r.code, r.body)
		}
		if f.stored(t, "configmaps", "ns", "c") != nil {
			t.Error("c is still stored")
		}
	})

	t.Run("admission decides on the latest state", func(t *testing.T) {
		deny = true
		defer func() { deny = false }()
		f.create(t, cms, `{"metadata":{"name":"d","labels":{"keep":"true"}}}`)
		cache.hold(t, key("d"))
		if r := f.do(t, http.MethodPut, cms+"/d", "", `{"metadata":{"name":"d"}}`); r.code != http.StatusOK {
			t.Fatalf("code %d: %s", r.code, r.body)
		}
		log.take()
		if r := f.do(t, http.MethodDelete, cms+"/d", "", ""); r.code != http.StatusOK {
			t.Fatalf("code %d, want d deleted, its latest state being admitted: %s", r.code, r.body)
		}
		calls, _ := log.take()
		if want := []string{"validate DELETE configmaps/", "validate DELETE configmaps/"}; !slices.Equal(calls, want) {
			t.Errorf("admission calls %q, want %q (the cache's state, then the latest)", calls, want)
		}

		f.create(t, cms, `{"metadata":{"name":"e","labels":{"keep":"true"}}}`)
		log.take()
		r := f.do(t, http.MethodDelete, cms+"/e", "", "")
		wantStatus(t, r, http.StatusForbidden, metav1.StatusReasonForbidden, `configmaps "e" is forbidden: kept`)
		if calls, _ := log.take(); len(calls) != 1 {
			t.Errorf("admission calls %q, want one: the cache's state was the latest", calls)
		}
		if f.stored(t, "configmaps", "ns", "e") == nil {
			t.Error("a denied delete deleted e")
		}
	})
}
