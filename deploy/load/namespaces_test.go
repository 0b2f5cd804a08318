package load

import (
	"slices"
	"testing"
)

// TestNamespaceLayout checks that the objects made at setup fill every
// namespace in contiguous blocks and that the lists' expected counts are
// what the first namespace holds: a wrong count fails every list of a run.
func TestNamespaceLayout(t *testing.T) {
	for _, tc := range []struct {
		name                string
		objects, namespaces int
		wantNames           []string
		wantFirst           int
	}{
		{"one namespace holds everything", 1000, 1, []string{"ns"}, 1000},
		{"an even spread", 1000, 10, []string{"ns", "ns-1", "ns-2", "ns-3", "ns-4", "ns-5", "ns-6", "ns-7", "ns-8", "ns-9"}, 100},
		{"an uneven spread", 40, 3, []string{"ns", "ns-1", "ns-2"}, 14},
		{"one object per namespace", 3, 3, []string{"ns", "ns-1", "ns-2"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{Objects: tc.objects, Namespaces: tc.namespaces}
			if got := namespaceNames("ns", tc.namespaces); !slices.Equal(got, tc.wantNames) {
				t.Errorf("namespaceNames = %v, want %v", got, tc.wantNames)
			}
			held := make([]int, tc.namespaces)
			last := 0
			for i := range tc.objects {
				n := o.namespaceIndex(i)
				if n < last || n > last+1 {
					t.Fatalf("object %d in namespace %d after one in namespace %d: not contiguous", i, n, last)
				}
				held[n]++
				last = n
			}
			if got := o.inFirstNamespace(); got != held[0] || got != tc.wantFirst {
				t.Errorf("inFirstNamespace = %d; the first namespace holds %d, want %d", got, held[0], tc.wantFirst)
			}
			for n, c := range held {
				if c == 0 {
					t.Errorf("namespace %d holds no object", n)
				}
			}
		})
	}
}
