package audit

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// appendEvent appends ev as json.Marshal writes it, byte for byte, which
// TestAppendEvent and FuzzAppendEvent hold it to. Every request the
// policy records is encoded once, and json.Marshal, walking the event by
// reflection, took about 30 µs of each audited request's gateway CPU:
// more than authorizing it. The parts that are rare or open-ended (a
// Status with details, request and response bodies, authentication
// metadata) still go through json.Marshal.
func appendEvent(b []byte, ev *auditv1.Event) ([]byte, error) {
	if ev.AuthenticationMetadata != nil {
		data, err := json.Marshal(ev)
		return append(b, data...), err
	}
	b = append(b, '{')
	first := true
	field := func(name string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, '"', ':')
	}
	str := func(name, v string, omitEmpty bool) {
		if v == "" && omitEmpty {
			return
		}
		field(name)
		b = appendString(b, v)
	}
	str("kind", ev.Kind, true)
	str("apiVersion", ev.APIVersion, true)
	str("level", string(ev.Level), false)
	str("auditID", string(ev.AuditID), false)
	str("stage", string(ev.Stage), false)
	str("requestURI", ev.RequestURI, false)
	str("verb", ev.Verb, false)
	field("user")
	b = appendUser(b, &ev.User)
	if ev.ImpersonatedUser != nil {
		field("impersonatedUser")
		b = appendUser(b, ev.ImpersonatedUser)
	}
	if len(ev.SourceIPs) > 0 {
		field("sourceIPs")
		b = appendStrings(b, ev.SourceIPs)
	}
	str("userAgent", ev.UserAgent, true)
	if r := ev.ObjectRef; r != nil {
		field("objectRef")
		b = append(b, '{')
		first = true
		str("resource", r.Resource, true)
		str("namespace", r.Namespace, true)
		str("name", r.Name, true)
		str("uid", string(r.UID), true)
		str("apiGroup", r.APIGroup, true)
		str("apiVersion", r.APIVersion, true)
		str("resourceVersion", r.ResourceVersion, true)
		str("subresource", r.Subresource, true)
		b = append(b, '}')
		first = false
	}
	var err error
	if ev.ResponseStatus != nil {
		field("responseStatus")
		if b, err = appendStatus(b, ev.ResponseStatus); err != nil {
			return b, err
		}
	}
	for _, o := range [...]struct {
		name string
		obj  *runtime.Unknown
	}{{"requestObject", ev.RequestObject}, {"responseObject", ev.ResponseObject}} {
		if o.obj == nil {
			continue
		}
		field(o.name)
		if verbatim(o.obj) {
			b = append(b, o.obj.Raw...)
			continue
		}
		data, err := json.Marshal(o.obj)
		if err != nil {
			return b, err
		}
		b = append(b, data...)
	}
	field("requestReceivedTimestamp")
	b = appendMicroTime(b, ev.RequestReceivedTimestamp)
	field("stageTimestamp")
	b = appendMicroTime(b, ev.StageTimestamp)
	if len(ev.Annotations) > 0 {
		field("annotations")
		b = appendMap(b, ev.Annotations, appendString)
	}
	return append(b, '}'), nil
}

// verbatim reports whether json.Marshal writes obj as its Raw, byte for
// byte: JSON already compact, with none of what json.Marshal escapes in
// strings (<, > and &, and U+2028 and U+2029, whose UTF-8 starts with
// 0xE2). The audit records bodies as compact, valid JSON (capture.json),
// which json.Marshal would check and copy once more: that was 5% of the
// gateway's CPU under creates of custom resources. Raw must be valid
// JSON; json.Marshal fails on what is not.
func verbatim(obj *runtime.Unknown) bool {
	if len(obj.Raw) == 0 || obj.ContentType != "" && obj.ContentType != runtime.ContentTypeJSON {
		return false
	}
	inString, escaped := false, false
	for _, c := range obj.Raw {
		switch {
		case c == '<' || c == '>' || c == '&' || c == 0xe2:
			return false
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

func appendUser(b []byte, u *authnv1.UserInfo) []byte {
	b = append(b, '{')
	n := len(b)
	sep := func() {
		if len(b) > n {
			b = append(b, ',')
		}
	}
	if u.Username != "" {
		b = append(b, `"username":`...)
		b = appendString(b, u.Username)
	}
	if u.UID != "" {
		sep()
		b = append(b, `"uid":`...)
		b = appendString(b, u.UID)
	}
	if len(u.Groups) > 0 {
		sep()
		b = append(b, `"groups":`...)
		b = appendStrings(b, u.Groups)
	}
	if len(u.Extra) > 0 {
		sep()
		b = append(b, `"extra":`...)
		b = appendMap(b, u.Extra, appendStrings)
	}
	return append(b, '}')
}

// appendStatus writes the Status the gateway records for most requests,
// a code with at most a status, message and reason, by hand.
func appendStatus(b []byte, s *metav1.Status) ([]byte, error) {
	if s.TypeMeta != (metav1.TypeMeta{}) || s.ListMeta.SelfLink != "" || s.ResourceVersion != "" || s.Continue != "" || s.RemainingItemCount != nil || s.Details != nil {
		data, err := json.Marshal(s)
		return append(b, data...), err
	}
	b = append(b, `{"metadata":{}`...)
	if s.Status != "" {
		b = append(b, `,"status":`...)
		b = appendString(b, s.Status)
	}
	if s.Message != "" {
		b = append(b, `,"message":`...)
		b = appendString(b, s.Message)
	}
	if s.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, string(s.Reason))
	}
	if s.Code != 0 {
		b = append(b, `,"code":`...)
		b = strconv.AppendInt(b, int64(s.Code), 10)
	}
	return append(b, '}'), nil
}

// appendStrings writes a list as json.Marshal does: nil is null.
func appendStrings[S ~[]string](b []byte, ss S) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, s)
	}
	return append(b, ']')
}

// appendMicroTime writes t as metav1.MicroTime's MarshalJSON does.
func appendMicroTime(b []byte, t metav1.MicroTime) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, metav1.RFC3339Micro)
	return append(b, '"')
}

// appendMap writes m as json.Marshal does, its keys sorted, each value
// by value.
func appendMap[V any](b []byte, m map[string]V, value func([]byte, V) []byte) []byte {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = value(b, m[k])
	}
	return append(b, '}')
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string the way encoding/json does by
// default: control characters, '"' and '\\' escaped, '<', '>' and '&' as
// \u escapes (HTML-safe), invalid UTF-8 as \ufffd, and U+2028 and U+2029
// escaped.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
