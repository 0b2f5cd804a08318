package changefeed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime/schema"

	proto "kplane.dev/proto/changefeed"
)

// keyParts is what an etcd key of a stored object says:
// <prefix>/registry/<group>/<resource>/[<namespace>/]<name>.
type keyParts struct {
	group, resource, namespace, name string
}

// parseKey splits key below registry (which ends in "/"); ok is false for
// keys of any other shape.
func parseKey(registry, key string) (keyParts, bool) {
	rest, found := strings.CutPrefix(key, registry)
	if !found {
		return keyParts{}, false
	}
	segs := strings.Split(rest, "/")
	var k keyParts
	switch len(segs) {
	case 3:
		k = keyParts{group: segs[0], resource: segs[1], name: segs[2]}
	case 4:
		k = keyParts{group: segs[0], resource: segs[1], namespace: segs[2], name: segs[3]}
	default:
		return keyParts{}, false
	}
	for _, s := range segs {
		if s == "" {
			return keyParts{}, false
		}
	}
	if k.group == proto.CoreGroup {
		k.group = ""
	}
	return k, true
}

// servedObject is a stored object as served: its bytes with
// metadata.resourceVersion set to rev and the fields named by drop left
// out, and the version and kind its apiVersion and kind name.
//
// It runs for every change published, so it edits the stored bytes
// rather than decoding and encoding the object: one validating pass, then
// a walk over the members of the top-level object and of metadata,
// copying every other value as it is. A key given twice counts once, its
// last value, as json.Unmarshal reads it.
func servedObject(stored []byte, rev int64, drop []string) (obj []byte, version, kind string, err error) {
	if !valid(stored) {
		return nil, "", "", fmt.Errorf("decode stored object: %w", json.Unmarshal(stored, new(any)))
	}
	start := skipSpace(stored, 0)
	if stored[start] != '{' {
		return nil, "", "", fmt.Errorf("decode stored object: not a JSON object")
	}
	var buf [16]member
	top := members(stored, start, buf[:0])
	meta := -1
	var apiVersion string
	for i, m := range top {
		if m.skip {
			continue
		}
		switch {
		case dropped(drop, m.key):
			top[i].skip = true
		case string(m.key) == "apiVersion":
			if apiVersion, err = stringValue(stored[m.value:m.end]); err != nil {
				return nil, "", "", fmt.Errorf("decode apiVersion: %w", err)
			}
		case string(m.key) == "kind":
			if kind, err = stringValue(stored[m.value:m.end]); err != nil {
				return nil, "", "", fmt.Errorf("decode kind: %w", err)
			}
		case string(m.key) == "metadata":
			meta = i
		}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return nil, "", "", fmt.Errorf("parse apiVersion %q: %w", apiVersion, err)
	}

	obj = make([]byte, 0, len(stored)+len(`,"metadata":{"resourceVersion":""}`)+20)
	obj = append(obj, '{')
	for i, m := range top {
		if m.skip {
			continue
		}
		if len(obj) > 1 {
			obj = append(obj, ',')
		}
		if i != meta {
			obj = append(obj, stored[m.start:m.end]...)
			continue
		}
		obj = append(obj, stored[m.start:m.value]...)
		if obj, err = appendMetadata(obj, stored, m.value, rev); err != nil {
			return nil, "", "", err
		}
	}
	if meta < 0 {
		if len(obj) > 1 {
			obj = append(obj, ',')
		}
		obj = append(obj, `"metadata":{`...)
		obj = append(appendResourceVersion(obj, rev), '}')
	}
	obj = append(obj, '}')
	return obj, gv.Version, kind, nil
}

func dropped(drop []string, key []byte) bool {
	for _, f := range drop {
		if string(key) == f {
			return true
		}
	}
	return false
}

// appendMetadata appends the metadata value at stored[at:] with its
// resourceVersion member set to rev: in place of the last one, or last
// if it has none. A null metadata is an empty one.
func appendMetadata(dst, stored []byte, at int, rev int64) ([]byte, error) {
	var buf [16]member
	var ms []member
	switch stored[at] {
	case '{':
		ms = members(stored, at, buf[:0])
	case 'n':
	default:
		return nil, fmt.Errorf("decode metadata: %w", json.Unmarshal(stored[at:skipValue(stored, at)], new(map[string]json.RawMessage)))
	}
	rv := -1
	for i, m := range ms {
		if !m.skip && string(m.key) == "resourceVersion" {
			rv = i
		}
	}
	dst = append(dst, '{')
	n := len(dst)
	for i, m := range ms {
		if m.skip {
			continue
		}
		if len(dst) > n {
			dst = append(dst, ',')
		}
		if i == rv {
			dst = appendResourceVersion(dst, rev)
			continue
		}
		dst = append(dst, stored[m.start:m.end]...)
	}
	if rv < 0 {
		if len(dst) > n {
			dst = append(dst, ',')
		}
		dst = appendResourceVersion(dst, rev)
	}
	return append(dst, '}'), nil
}

func appendResourceVersion(dst []byte, rev int64) []byte {
	dst = append(dst, `"resourceVersion":"`...)
	dst = strconv.AppendInt(dst, rev, 10)
	return append(dst, '"')
}

// member is one member of a JSON object: stored[start:end] is the whole
// member, key to value, and stored[value:end] its value. skip is set on a
// member whose key comes again later in the object.
type member struct {
	key               []byte
	start, value, end int
	skip              bool
}

// members appends to ms the members of the object that starts at
// stored[at], which must be valid JSON.
func members(stored []byte, at int, ms []member) []member {
	i := skipSpace(stored, at+1)
	for stored[i] != '}' {
		var m member
		m.start = i
		i = skipString(stored, i)
		m.key = key(stored[m.start:i])
		i = skipSpace(stored, i)
		m.value = skipSpace(stored, i+1) // past ':'
		m.end = skipValue(stored, m.value)
		for j := range ms {
			if string(ms[j].key) == string(m.key) {
				ms[j].skip = true
			}
		}
		ms = append(ms, m)
		i = skipSpace(stored, m.end)
		if stored[i] == ',' {
			i = skipSpace(stored, i+1)
		}
	}
	return ms
}

// key is the name a quoted key stands for. Only a key with escapes or
// bytes beyond ASCII (which json.Unmarshal may replace) is decoded.
func key(quoted []byte) []byte {
	if plain(quoted) {
		return quoted[1 : len(quoted)-1]
	}
	var s string
	_ = json.Unmarshal(quoted, &s) // valid: members was given valid JSON
	return []byte(s)
}

// stringValue is the string a JSON value (valid JSON) holds, "" for null,
// an error for any other type, as json.Unmarshal into a string has it.
func stringValue(v []byte) (string, error) {
	if len(v) >= 2 && v[0] == '"' && plain(v) {
		return string(v[1 : len(v)-1]), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", err
	}
	return s, nil
}

// plain says a quoted string stands for its bytes between the quotes.
func plain(quoted []byte) bool {
	for _, c := range quoted {
		if c == '\\' || c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// maxDepth is how deeply encoding/json lets arrays and objects nest.
const maxDepth = 10000

// valid says whether b is one JSON value, as json.Valid does (and so
// whether json.Unmarshal can decode it): a direct scan, several times
// faster than json.Valid's state machine, which for servedObject cost
// more than all the rest.
func valid(b []byte) bool {
	end, ok := validValue(b, skipSpace(b, 0), 0)
	return ok && skipSpace(b, end) == len(b)
}

// validValue returns the end of the valid value starting at b[i], or
// false; depth is how many arrays and objects enclose it.
func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		return validString(b, i)
	case '{', '[':
		if depth == maxDepth {
			return i, false
		}
		open, end := b[i], byte('}')
		if open == '[' {
			end = ']'
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == end {
			return i + 1, true
		}
		for {
			var ok bool
			if open == '{' {
				if i, ok = validString(b, i); !ok {
					return i, false
				}
				if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
					return i, false
				}
				i = skipSpace(b, i+1)
			}
			if i, ok = validValue(b, i, depth+1); !ok {
				return i, false
			}
			if i = skipSpace(b, i); i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case end:
				return i + 1, true
			default:
				return i, false
			}
		}
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	default:
		return validNumber(b, i)
	}
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// validString returns the end of the valid string starting at b[i], or
// false. As in encoding/json, bytes that are not UTF-8 are let through.
func validString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	for i++; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i++; i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i <= 4 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return i, false
					}
				}
				i += 4
			default:
				return i, false
			}
		}
	}
	return i, false
}

// validNumber returns the end of the valid number starting at b[i], or
// false: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func validNumber(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		if j := digits(b, i+1); j > i+1 {
			i = j
		} else {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if j := digits(b, i); j > i {
			i = j
		} else {
			return i, false
		}
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string starting at b[i].
func skipString(b []byte, i int) int {
	i++
	for {
		q := bytes.IndexByte(b[i:], '"') + i
		escapes := 0
		for j := q - 1; b[j] == '\\'; j-- {
			escapes++
		}
		if escapes%2 == 0 {
			return q + 1
		}
		i = q + 1
	}
}

// skipValue returns the end of the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // a number, true, false or null
		for i < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[i])) {
			i++
		}
		return i
	}
}

// message is one message ready to publish.
type message struct {
	subject string
	id      string
	rev     int64
	event   proto.Event
}

// change builds the message of one stored object: stored is its last
// state (nil if etcd no longer has it, for a deletion), rev the
// resourceVersion it is served with. ok is false for a key the publisher
// does not publish.
func (p *Publisher) change(typ proto.EventType, key string, stored []byte, rev int64) (message, bool, error) {
	k, ok := parseKey(p.registry, key)
	if !ok {
		return message{}, false, nil
	}
	e := proto.Event{Type: typ, ResourceVersion: strconv.FormatInt(rev, 10), Group: k.group, Resource: k.resource, Namespace: k.namespace, Name: k.name}
	byStored := p.o.kinds == nil
	if !byStored {
		gvk, ok := p.o.kinds[schema.GroupResource{Group: k.group, Resource: k.resource}]
		switch {
		case ok:
			e.Version, e.Kind = gvk.Version, gvk.Kind
		case p.o.others:
			byStored = true
		default:
			return message{}, false, nil
		}
	}
	if stored != nil {
		var drop []string
		if k.group == "" && k.resource == "secrets" && !p.o.secretData {
			drop = []string{"data", "stringData"} // a Secret's contents
		}
		obj, version, kind, err := servedObject(stored, rev, drop)
		if err != nil {
			return message{}, false, fmt.Errorf("key %q at revision %d: %w", key, rev, err)
		}
		e.Object = obj
		if byStored {
			e.Version, e.Kind = version, kind
		}
	}
	if e.Version == "" {
		return message{}, false, fmt.Errorf("key %q at revision %d: no version to publish it under (its last state is gone; WithKinds names it)", key, rev)
	}
	return message{subject: p.subject(k.group, e.Version, k.resource), event: e}, true, nil
}

func (p *Publisher) subject(group, version, resource string) string {
	return p.o.subjectRoot + "." + proto.SubjectGroup(group) + "." + version + "." + resource
}
