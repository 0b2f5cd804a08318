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
	var values [][]byte
	ok := eachMember(data, func(key, value []byte) bool {
		if bytes.EqualFold(key, []byte(name)) {
			values = append(values, value)
		}
		return true
	})
	if !ok {
		return nil, false
	}
	return values, true
}
