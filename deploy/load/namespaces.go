package load

import "strconv"

// namespaceNames are the n namespaces of a side whose first is base: base,
// base-1, ..., base-(n-1), so that --namespaces 1 makes base alone.
func namespaceNames(base string, n int) []string {
	names := make([]string, n)
	names[0] = base
	for i := 1; i < n; i++ {
		names[i] = base + "-" + strconv.Itoa(i)
	}
	return names
}

// namespaceIndex is the namespace of object i made at setup. The objects
// fill the namespaces in contiguous blocks rather than in turn, so that
// every namespace holds a run of the groups of groupLabel (object i is in
// group i%10) and list-selector still matches one in ten.
func (o *Options) namespaceIndex(i int) int { return i * o.Namespaces / o.Objects }

// inFirstNamespace is how many objects made at setup the first namespace
// holds, those the lists read: objects 0 to inFirstNamespace()-1.
func (o *Options) inFirstNamespace() int { return (o.Objects + o.Namespaces - 1) / o.Namespaces }
