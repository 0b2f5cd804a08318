package objects

import "bytes"

// Members returns the values of the members of data, a valid JSON
// object, whose key is name as encoding/json matches a key to a struct
// field (case-insensitively), in the order they come, and true. It
// reports false when data is not an object, or has a key with an escape
// or a byte outside ASCII, which encoding/json unescapes and folds in
// ways this does not: the caller then decodes all of data. Reading one
// member this way spares decoding the others, such as an object's data
// when only its metadata is wanted.
func Members(data []byte, name string) ([][]byte, bool) {
	return members(data, func(key []byte) bool { return bytes.EqualFold(key, []byte(name)) })
}

// MembersExact is Members with keys matched exactly, as
// sigs.k8s.io/json's case-sensitive decoding matches a key to a field.
func MembersExact(data []byte, name string) ([][]byte, bool) {
	return members(data, func(key []byte) bool { return string(key) == name })
}

func members(data []byte, match func(key []byte) bool) ([][]byte, bool) {
	var values [][]byte
	ok := eachMember(data, func(key, value []byte) bool {
		if match(key) {
			values = append(values, value)
		}
		return true
	})
	if !ok {
		return nil, false
	}
	return values, true
}

// WithoutMember returns data, a valid JSON object, without the members
// named name of those of its members named parent that are objects, keys
// matched exactly as decoding into a map matches them, and true: what
// decoding data into a map, deleting name from its parent and encoding it
// again gives, without decoding anything. The rest of data is kept as it
// is. It reports false where Members does, also for a key inside parent;
// the caller then decodes all of data.
func WithoutMember(data []byte, parent, name string) ([]byte, bool) {
	type replacement struct {
		start, end int
		members    [][]byte
	}
	var reps []replacement
	ok := eachMemberAt(data, func(key []byte, _, start, end int) bool {
		if string(key) != parent || !at(data, start, '{') {
			return true
		}
		value := data[start:end]
		r := replacement{start: start, end: end}
		dropped := false
		if !eachMemberAt(value, func(key []byte, first, _, end int) bool {
			if string(key) == name {
				dropped = true
			} else {
				r.members = append(r.members, value[first:end])
			}
			return true
		}) {
			return false
		}
		if dropped {
			reps = append(reps, r)
		}
		return true
	})
	if !ok {
		return nil, false
	}
	if len(reps) == 0 {
		return data, true
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, r := range reps {
		out = append(out, data[last:r.start]...)
		out = append(out, '{')
		out = append(out, bytes.Join(r.members, []byte{','})...)
		out = append(out, '}')
		last = r.end
	}
	return append(out, data[last:]...), true
}
