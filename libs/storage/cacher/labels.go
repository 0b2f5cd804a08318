package cacher

import (
	"hash/maphash"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
)

// labelHashes are hashes of an object's labels, each of a key and its
// value, kept in the cache's entry beside the object, so that a list
// with a label selector passes over objects that cannot match without
// reading their labels. A selector's equality requirements are what
// nearly every controller lists with; reading a map of labels per object
// was 17% of core's CPU listing 100 of 1,000 ConfigMaps by label, mostly
// cache misses that the entries, side by side in the tree, do not have.
type labelHashes struct {
	h [maxLabelHashes]uint64
	// n is how many of h are set, or -1 when the object has more labels
	// than h holds (or none can be read): then it is always read.
	n int8
}

// maxLabelHashes is how many labels an entry keeps hashes of: most
// objects have a few.
const maxLabelHashes = 4

var labelSeed = maphash.MakeSeed()

func labelHash(key, value string) uint64 {
	var h maphash.Hash
	h.SetSeed(labelSeed)
	h.WriteString(key)
	h.WriteByte(0)
	h.WriteString(value)
	return h.Sum64()
}

func hashLabels(obj runtime.Object) labelHashes {
	m, err := meta.Accessor(obj)
	if err != nil {
		return labelHashes{n: -1}
	}
	ls := m.GetLabels()
	if len(ls) > maxLabelHashes {
		return labelHashes{n: -1}
	}
	var lh labelHashes
	for k, v := range ls {
		lh.h[lh.n] = labelHash(k, v)
		lh.n++
	}
	return lh
}

// mayMatch reports whether the object can have every label of need, the
// hashes of a selector's equality requirements. Hashes can collide, so
// true only means the object has to be read.
func (lh *labelHashes) mayMatch(need []uint64) bool {
	if lh.n < 0 {
		return true
	}
	for _, want := range need {
		found := false
		for _, have := range lh.h[:lh.n] {
			if have == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// requiredLabels are the hashes of the labels that an object must have to
// match sel: its requirements of one key equal to one value.
func requiredLabels(sel labels.Selector) []uint64 {
	if sel == nil || sel.Empty() {
		return nil
	}
	reqs, selectable := sel.Requirements()
	if !selectable {
		return nil
	}
	var need []uint64
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vs := r.Values(); vs.Len() == 1 {
				need = append(need, labelHash(r.Key(), vs.UnsortedList()[0]))
			}
		}
	}
	return need
}
