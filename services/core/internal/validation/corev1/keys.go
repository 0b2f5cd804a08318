package corev1

import (
	"maps"
	"slices"
)

// sortedKeys orders a map's keys so that errors come out in the same order
// on every request.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
