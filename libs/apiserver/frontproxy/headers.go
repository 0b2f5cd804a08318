package frontproxy

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The identity headers the gateway sets, as kube's front proxy names them.
const (
	UserHeader        = "X-Remote-User"
	UIDHeader         = "X-Remote-Uid"
	GroupHeader       = "X-Remote-Group"
	ExtraHeaderPrefix = "X-Remote-Extra-"
)

// Headers names the request headers an identity travels in, as kube's
// --requestheader-*-headers flags do.
type Headers struct {
	// User are read in order; the first one set names the user.
	User []string
	// UID are read in order; the first one set is the user's uid.
	UID []string
	// Group are all read: every non-empty value is a group.
	Group []string
	// ExtraPrefixes start the names of the headers of extra attributes;
	// the rest of the name, lowercased and percent-decoded, is the key.
	ExtraPrefixes []string
}

// DefaultHeaders are the X-Remote-* headers kube's front proxies set and
// the gateway writes.
func DefaultHeaders() Headers {
	return Headers{
		User:          []string{UserHeader},
		UID:           []string{UIDHeader},
		Group:         []string{GroupHeader},
		ExtraPrefixes: []string{ExtraHeaderPrefix},
	}
}

// Read reads the user hs names in h as kube's requestheader authenticator
// does; nil when no user header is set.
func (hs Headers) Read(h http.Header) *User {
	name := firstValue(h, hs.User)
	if name == "" {
		return nil
	}
	u := &User{Name: name, UID: firstValue(h, hs.UID)}
	for _, n := range hs.Group {
		for _, v := range h.Values(n) {
			if v != "" {
				u.Groups = append(u.Groups, v)
			}
		}
	}
	for _, p := range hs.ExtraPrefixes {
		for name, values := range h {
			key, ok := extraKey(name, p)
			if !ok {
				continue
			}
			if u.Extra == nil {
				u.Extra = map[string][]string{}
			}
			u.Extra[key] = append(u.Extra[key], values...)
		}
	}
	return u
}

// Strip deletes every header of hs from h, so nothing after the reader
// can take an identity from them.
func (hs Headers) Strip(h http.Header) {
	for _, names := range [][]string{hs.User, hs.UID, hs.Group} {
		for _, n := range names {
			h.Del(n)
		}
	}
	for name := range h {
		for _, p := range hs.ExtraPrefixes {
			if hasPrefixFold(name, p) {
				delete(h, name)
			}
		}
	}
}

// SetHeaders replaces every identity a client may have put in h (front
// proxy headers under any name kube uses, impersonation headers and the
// credential the front proxy has already read) with u in the default
// headers, extra keys percent-encoded as kube's front proxy does.
func SetHeaders(h http.Header, u *User) {
	StripClientIdentity(h)
	h.Set(UserHeader, u.Name)
	if u.UID != "" {
		h.Set(UIDHeader, u.UID)
	}
	for _, g := range u.Groups {
		h.Add(GroupHeader, g)
	}
	for k, vs := range u.Extra {
		for _, v := range vs {
			h.Add(ExtraHeaderPrefix+escapeExtraKey(k), v)
		}
	}
}

// StripClientIdentity removes from h what a client may send to speak for
// someone: X-Remote-* headers, Impersonate-* headers and Authorization.
func StripClientIdentity(h http.Header) {
	for name := range h {
		if hasPrefixFold(name, "X-Remote-") || hasPrefixFold(name, "Impersonate-") || strings.EqualFold(name, "Authorization") {
			delete(h, name)
		}
	}
}

// firstValue is the first value of the first header of names that is
// set, as kube reads the user and uid.
func firstValue(h http.Header, names []string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// extraKey is the extra key of header name under prefix: the rest of the
// name lowercased and percent-decoded, or kept as sent when it does not
// decode, as kube records it.
func extraKey(name, prefix string) (string, bool) {
	if len(name) <= len(prefix) || !hasPrefixFold(name, prefix) {
		return "", false
	}
	key := strings.ToLower(name[len(prefix):])
	if k, err := url.PathUnescape(key); err == nil {
		return k, true
	}
	return key, true
}

// hasPrefixFold matches in any case: header maps filled by hand need not
// hold canonical names.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// escapeExtraKey percent-encodes what a header name cannot carry, and
// '%' itself, as kube's front proxy does for extra keys such as
// "authentication.kubernetes.io/credential-id".
func escapeExtraKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if isTokenChar(c) && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0
}
