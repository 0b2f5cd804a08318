package objects

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"
)

// The JSON serializer reads a document twice: encoding/json over all of it
// for apiVersion and kind, then sigs.k8s.io/json into the object. Bytes the
// store wrote need only the second pass: the decoded object carries the
// same apiVersion and kind the first pass would have read, as long as the
// top-level keys leave no room for encoding/json's case-insensitive
// matching to read them differently. The fast paths below take the one
// pass and report false for anything else, so that Decode falls back to
// the serializer; whatever they accept, the serializer returns the same.

// decodeStored is Decode's one pass for a document naming exactly this
// kind; the serializer would decode it into the same struct the same way.
func (t *Typed) decodeStored(data []byte) (runtime.Object, bool) {
	obj, err := t.scheme.New(t.gvk)
	if err != nil {
		return nil, false
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj); err != nil {
		return nil, false
	}
	// The serializer sets the kind it parsed from apiVersion, which may
	// be spelled otherwise ("/v1" for "v1").
	if obj.GetObjectKind().GroupVersionKind() != t.gvk || !plainTypeKeys(data) {
		return nil, false
	}
	obj.GetObjectKind().SetGroupVersionKind(t.gvk)
	return obj, true
}

// decodeRequestJSON is DecodeRequest's one pass for a JSON body that
// names this kind, or leaves apiVersion and kind out, which the serializer
// then takes from the endpoint. Strict reports unknown and duplicate
// fields as the serializer does, in a strict decoding error that comes
// with the object. Under a load of creates the serializer's first pass
// was 6% of core's CPU.
func (t *Typed) decodeRequestJSON(data []byte, strict bool) (runtime.Object, bool, error) {
	obj, err := t.scheme.New(t.gvk)
	if err != nil {
		return nil, false, nil
	}
	var strictErrs []error
	if strict {
		strictErrs, err = sigsjson.UnmarshalStrict(data, obj)
	} else {
		err = sigsjson.UnmarshalCaseSensitivePreserveInts(data, obj)
	}
	// A failure is reported by the serializer, in its words.
	if err != nil || !plainTypeKeys(data) {
		return nil, false, nil
	}
	// The apiVersion as written: GroupVersionKind() reads one that does
	// not parse as none, where the serializer fails.
	typ, ok := obj.GetObjectKind().(*metav1.TypeMeta)
	if !ok {
		return nil, false, nil
	}
	gv, err := schema.ParseGroupVersion(typ.APIVersion)
	if err != nil {
		return nil, false, nil
	}
	// The serializer's defaulting: the endpoint's kind, and its group
	// and version where the body names neither, or only the group.
	actual := gv.WithKind(typ.Kind)
	if actual.Kind == "" {
		actual.Kind = t.gvk.Kind
	}
	if actual.Version == "" && (actual.Group == "" || actual.Group == t.gvk.Group) {
		actual.Group, actual.Version = t.gvk.Group, t.gvk.Version
	}
	if actual != t.gvk {
		// Another kind decodes into another struct.
		return nil, false, nil
	}
	obj.GetObjectKind().SetGroupVersionKind(actual)
	if len(strictErrs) > 0 {
		return obj, true, runtime.NewStrictDecodingError(strictErrs)
	}
	return obj, true, nil
}

// decodeStored is Decode's one pass for a document naming a kind and a
// version, of any group: the serializer keeps the decoded content whatever
// it names, and a custom resource's storage version need not be the
// version served.
func (u *Unstructured) decodeStored(data []byte) (runtime.Object, bool) {
	// What unstructured.Unstructured's UnmarshalJSON does, which is how
	// the serializer fills it.
	m := map[string]any{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		return nil, false
	}
	obj := &unstructured.Unstructured{Object: m}
	// An apiVersion that does not parse reads as no version here, and
	// fails the serializer.
	if gvk := obj.GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" || !plainTypeKeys(data) {
		return nil, false
	}
	return obj, true
}

// decodeRequestJSON is DecodeRequest's one pass for a JSON body, on
// decodeStored's terms. Strictly, it collects duplicate fields as the
// strict serializer does, which decodes a custom resource into a map the
// same way.
func (u *Unstructured) decodeRequestJSON(data []byte, strict bool) (runtime.Object, bool, error) {
	if !strict {
		obj, ok := u.decodeStored(data)
		return obj, ok, nil
	}
	m := map[string]any{}
	strictErrs, err := sigsjson.UnmarshalStrict(data, &m)
	if err != nil {
		return nil, false, nil
	}
	obj := &unstructured.Unstructured{Object: m}
	if gvk := obj.GroupVersionKind(); gvk.Kind == "" || gvk.Version == "" || !plainTypeKeys(data) {
		return nil, false, nil
	}
	if len(strictErrs) > 0 {
		return obj, true, runtime.NewStrictDecodingError(strictErrs)
	}
	return obj, true, nil
}

// plainTypeKeys reports whether data, valid JSON, is an object naming
// apiVersion and kind at most once each, spelled exactly, and with no key
// encoding/json would match to either case-insensitively. A key with an
// escape or a byte outside ASCII fails too: the store never writes one at
// the top level, and ASCII keeps the case folding simple.
func plainTypeKeys(data []byte) bool {
	var kind, apiVersion bool
	return eachMember(data, func(key, _ []byte) bool {
		switch {
		case string(key) == "kind":
			if kind {
				return false
			}
			kind = true
		case string(key) == "apiVersion":
			if apiVersion {
				return false
			}
			apiVersion = true
		case bytes.EqualFold(key, []byte("kind")), bytes.EqualFold(key, []byte("apiVersion")):
			return false
		}
		return true
	})
}

// eachMember calls f with the key and the value of each member of the
// JSON object data, in order, while f returns true. It reports false
// when data is not an object it can walk, when a key has an escape or a
// byte outside ASCII, or when f returned false.
func eachMember(data []byte, f func(key, value []byte) bool) bool {
	return eachMemberAt(data, func(key []byte, _, start, end int) bool {
		return f(key, data[start:end])
	})
}

// eachMemberAt is eachMember telling where in data each member is: its
// key's opening quote at first, its value from start to end.
func eachMemberAt(data []byte, f func(key []byte, first, start, end int) bool) bool {
	i := skipSpace(data, 0)
	if !at(data, i, '{') {
		return false
	}
	if i = skipSpace(data, i+1); at(data, i, '}') {
		return true
	}
	for {
		if !at(data, i, '"') {
			return false
		}
		n := bytes.IndexByte(data[i+1:], '"')
		if n < 0 {
			return false
		}
		first := i
		key := data[i+1 : i+1+n]
		if !plainASCII(key) {
			return false
		}
		if i = skipSpace(data, i+n+2); !at(data, i, ':') {
			return false
		}
		start := skipSpace(data, i+1)
		if i = skipMember(data, start); i < 0 {
			return false
		}
		if !f(key, first, start, start+len(bytes.TrimRight(data[start:i], " \t\r\n"))) {
			return false
		}
		if data[i] == '}' {
			return true
		}
		i = skipSpace(data, i+1)
	}
}

// plainASCII reports whether key has neither escapes nor bytes outside
// ASCII; an escaped quote would also have cut key short at its backslash.
func plainASCII(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipMember returns the index of the ',' or '}' ending the object member
// whose value starts at data[i], or -1.
func skipMember(data []byte, i int) int {
	depth := 0
	for i < len(data) {
		switch data[i] {
		case '"':
			if i = skipString(data, i); i < 0 {
				return -1
			}
			continue
		case '{', '[':
			depth++
		case ']':
			depth--
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	return -1
}

// skipString returns the index just past the string opening at data[i],
// or -1.
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return -1
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

func at(data []byte, i int, c byte) bool { return i < len(data) && data[i] == c }
