package rest

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

func cacheTestObject(uid, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", UID: types.UID(uid), ResourceVersion: rv},
	}
}

// counting returns an encoder that counts its calls and encodes an object
// as its UID, resourceVersion and n.
func counting(n *atomic.Int32) func(runtime.Object) ([]byte, error) {
	return func(obj runtime.Object) ([]byte, error) {
		cm := obj.(*corev1.ConfigMap)
		return fmt.Appendf(nil, "%s/%s/%d", cm.UID, cm.ResourceVersion, n.Add(1)), nil
	}
}

func TestEventCacheSharesEncoding(t *testing.T) {
	c := newEventCache()
	var calls atomic.Int32
	enc := counting(&calls)

	// Many watches send the same change at once: one encoding.
	var wg sync.WaitGroup
	got := make([][]byte, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := c.encode(watch.Modified, cacheTestObject("u1", "5"), false, enc)
			if err != nil {
				t.Error(err)
			}
			got[i] = data
		}()
	}
	wg.Wait()
	if calls.Load() != 1 {
		t.Fatalf("20 watches of one change encoded it %d times, want once", calls.Load())
	}
	for _, g := range got {
		if string(g) != "u1/5/1" {
			t.Fatalf("a watch got %q, want the shared u1/5/1", g)
		}
	}

	for _, tt := range []struct {
		name     string
		typ      watch.EventType
		obj      runtime.Object
		protobuf bool
	}{
		{"another event type", watch.Deleted, cacheTestObject("u1", "5"), false},
		{"protobuf", watch.Modified, cacheTestObject("u1", "5"), true},
		{"another revision", watch.Modified, cacheTestObject("u1", "6"), false},
		{"another object", watch.Modified, cacheTestObject("u2", "5"), false},
		{"no uid", watch.Modified, cacheTestObject("", "5"), false},
	} {
		before := calls.Load()
		if _, err := c.encode(tt.typ, tt.obj, tt.protobuf, enc); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != before+1 {
			t.Errorf("%s: not encoded anew", tt.name)
		}
	}
	before := calls.Load()
	if _, err := c.encode(watch.Modified, cacheTestObject("", "5"), false, enc); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != before+1 {
		t.Error("an object without a uid was taken from the cache")
	}
}

func TestEventCacheKeepsNewestWithinLimit(t *testing.T) {
	c := newEventCache()
	c.limit = 20 // each encoding below is 6 or 7 bytes
	var calls atomic.Int32
	enc := counting(&calls)
	for rv := range 10 {
		if _, err := c.encode(watch.Modified, cacheTestObject("u", fmt.Sprint(rv)), false, enc); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > c.limit || len(c.entries) != 3 || len(c.order)-c.head != 3 {
		t.Fatalf("holds %d bytes in %d entries (%d keys in order), want the newest 3 within %d bytes", c.bytes, len(c.entries), len(c.order)-c.head, c.limit)
	}
	before := calls.Load()
	if _, err := c.encode(watch.Modified, cacheTestObject("u", "9"), false, enc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.encode(watch.Modified, cacheTestObject("u", "0"), false, enc); err != nil {
		t.Fatal(err)
	}
	if got := calls.Load() - before; got != 1 {
		t.Fatalf("%d encodings for the newest and the oldest change, want 1 (the oldest, evicted)", got)
	}
}

func TestEventCacheKeepsErrors(t *testing.T) {
	c := newEventCache()
	failed := func(runtime.Object) ([]byte, error) { return nil, fmt.Errorf("no") }
	if _, err := c.encode(watch.Added, cacheTestObject("u", "1"), false, failed); err == nil {
		t.Fatal("an encoding error was lost")
	}
	if c.bytes != 0 {
		t.Fatalf("a failed encoding counts %d bytes", c.bytes)
	}
}
