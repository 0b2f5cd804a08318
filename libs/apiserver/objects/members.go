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
	i := skipSpace(data, 0)
	if !at(data, i, '{') {
		return nil, false
	}
	var values [][]byte
	if i = skipSpace(data, i+1); at(data, i, '}') {
		return values, true
	}
	for {
		if !at(data, i, '"') {
			return nil, false
		}
		n := bytes.IndexByte(data[i+1:], '"')
		if n < 0 {
			return nil, false
		}
		key := data[i+1 : i+1+n]
		if !plainASCII(key) {
			return nil, false
		}
		if i = skipSpace(data, i+n+2); !at(data, i, ':') {
			return nil, false
		}
		start := skipSpace(data, i+1)
		if i = skipMember(data, start); i < 0 {
			return nil, false
		}
		if bytes.EqualFold(key, []byte(name)) {
			values = append(values, bytes.TrimRight(data[start:i], " \t\r\n"))
		}
		if data[i] == '}' {
			return values, true
		}
		i = skipSpace(data, i+1)
	}
}
