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
)

var schemaConfigMap = corev1.SchemeGroupVersion.WithKind("ConfigMap")

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

func TestEncodingCacheSharesEncoding(t *testing.T) {
	c := newEncodingCache()
	var calls atomic.Int32
	enc := counting(&calls)

	// Many watches send the same change at once: one encoding.
	var wg sync.WaitGroup
	got := make([][]byte, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := c.encode(cacheTestObject("u1", "5"), false, false, enc)
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
		obj      runtime.Object
		deleted  bool
		protobuf bool
	}{
		{"deleted", cacheTestObject("u1", "5"), true, false},
		{"protobuf", cacheTestObject("u1", "5"), false, true},
		{"another revision", cacheTestObject("u1", "6"), false, false},
		{"the revision before again", cacheTestObject("u1", "5"), false, false},
		{"another object", cacheTestObject("u2", "5"), false, false},
		{"no uid", cacheTestObject("", "5"), false, false},
	} {
		before := calls.Load()
		if _, err := c.encode(tt.obj, tt.deleted, tt.protobuf, enc); err != nil {
			t.Fatal(err)
		}
		if calls.Load() != before+1 {
			t.Errorf("%s: not encoded anew", tt.name)
		}
	}
	before := calls.Load()
	if _, err := c.encode(cacheTestObject("", "5"), false, false, enc); err != nil {
		t.Fatal(err)
	}
	if calls.Load() != before+1 {
		t.Error("an object without a uid was taken from the cache")
	}
	if len(c.entries) != 4 {
		t.Errorf("%d entries, want 4: u1 as deleted, in protobuf and at its latest revision, and u2", len(c.entries))
	}
}

func TestEncodingCacheKeepsNewestWithinLimit(t *testing.T) {
	c := newEncodingCache()
	c.limit = 20 // each encoding below is 6 or 7 bytes
	var calls atomic.Int32
	enc := counting(&calls)
	for i := range 10 {
		if _, err := c.encode(cacheTestObject(fmt.Sprint(i), "1"), false, false, enc); err != nil {
			t.Fatal(err)
		}
	}
	if c.bytes > c.limit || len(c.entries) != 3 || len(c.order)-c.head != 3 {
		t.Fatalf("holds %d bytes in %d entries (%d places in order), want the newest 3 within %d bytes", c.bytes, len(c.entries), len(c.order)-c.head, c.limit)
	}
	before := calls.Load()
	if _, err := c.encode(cacheTestObject("9", "1"), false, false, enc); err != nil {
		t.Fatal(err)
	}
	if _, err := c.encode(cacheTestObject("0", "1"), false, false, enc); err != nil {
		t.Fatal(err)
	}
	if got := calls.Load() - before; got != 1 {
		t.Fatalf("%d encodings for the newest and the oldest object, want 1 (the oldest, evicted)", got)
	}
}

func TestEncodingCacheKeepsOneStatePerObject(t *testing.T) {
	c := newEncodingCache()
	var calls atomic.Int32
	enc := counting(&calls)
	for rv := range 1000 {
		if _, err := c.encode(cacheTestObject("u", fmt.Sprint(rv)), false, false, enc); err != nil {
			t.Fatal(err)
		}
	}
	if len(c.entries) != 1 || len(c.order)-c.head > 2*len(c.entries)+64 || c.bytes != len(c.entries[encodingKey{uid: "u", gvk: schemaConfigMap}].data) {
		t.Fatalf("an object changed 1000 times holds %d entries, %d places in order and %d bytes, want its latest state only", len(c.entries), len(c.order)-c.head, c.bytes)
	}
}

func TestEncodingCacheKeepsErrors(t *testing.T) {
	c := newEncodingCache()
	failed := func(runtime.Object) ([]byte, error) { return nil, fmt.Errorf("no") }
	if _, err := c.encode(cacheTestObject("u", "1"), false, false, failed); err == nil {
		t.Fatal("an encoding error was lost")
	}
	if c.bytes != 0 {
		t.Fatalf("a failed encoding counts %d bytes", c.bytes)
	}
}
