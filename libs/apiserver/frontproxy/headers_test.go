package frontproxy_test

import (
	"net/http"
	"reflect"
	"testing"

	"kplane.dev/libs/apiserver/frontproxy"
)

// TestHeadersRoundTrip writes a user as the gateway does and reads it as a
// backend does: what arrives is what was sent, whatever the client had
// put in the request.
func TestHeadersRoundTrip(t *testing.T) {
	u := &frontproxy.User{
		Name:   "alice@example.com",
		UID:    "uid-1",
		Groups: []string{"dev", "system:authenticated"},
		Extra: map[string][]string{
			"authentication.kubernetes.io/credential-id": {"JTI=abc"},
			"scopes":         {"a", "b"},
			"100%/sure key":  {"yes"},
			"example.com/ü":  {"unicode"},
			"already%2fsafe": {"percent"},
		},
	}
	h := http.Header{
		"X-Remote-User":            {"mallory"},
		"X-Remote-Group":           {"system:masters"},
		"X-Remote-Extra-Scopes":    {"forged"},
		"x-remote-extra-lowercase": {"forged"},
		"Impersonate-User":         {"root"},
		"Impersonate-Extra-Scopes": {"forged"},
		"Authorization":            {"Bearer stolen"},
		"Accept":                   {"application/json"},
	}
	frontproxy.SetHeaders(h, u)
	got := frontproxy.DefaultHeaders().Read(h)
	if !reflect.DeepEqual(got, u) {
		t.Errorf("read back %+v, want %+v", got, u)
	}
	for _, name := range []string{"Impersonate-User", "Impersonate-Extra-Scopes", "Authorization", "x-remote-extra-lowercase"} {
		if _, ok := h[name]; ok {
			t.Errorf("client header %s survived", name)
		}
	}
	if h.Get("Accept") != "application/json" {
		t.Error("a header that carries no identity was removed")
	}
}

func TestHeadersRead(t *testing.T) {
	custom := frontproxy.Headers{User: []string{"X-User", "X-Remote-User"}, Group: []string{"X-Group"}, ExtraPrefixes: []string{"X-Extra-"}}
	cases := []struct {
		name string
		hs   frontproxy.Headers
		h    http.Header
		want *frontproxy.User
	}{
		{"no user", frontproxy.DefaultHeaders(), http.Header{"X-Remote-Group": {"system:masters"}}, nil},
		{"empty user", frontproxy.DefaultHeaders(), http.Header{"X-Remote-User": {""}}, nil},
		{"first user header set wins", custom, http.Header{"X-Remote-User": {"b"}, "X-User": {"a"}}, &frontproxy.User{Name: "a"}},
		{"second user header when the first is empty", custom, http.Header{"X-User": {""}, "X-Remote-User": {"b"}}, &frontproxy.User{Name: "b"}},
		{"empty groups skipped", custom, http.Header{"X-User": {"a"}, "X-Group": {"", "g"}}, &frontproxy.User{Name: "a", Groups: []string{"g"}}},
		{"malformed extra key kept as sent", custom, http.Header{"X-User": {"a"}, "X-Extra-Bad%zz": {"v"}}, &frontproxy.User{Name: "a", Extra: map[string][]string{"bad%zz": {"v"}}}},
		{"prefix alone is no extra", custom, http.Header{"X-User": {"a"}, "X-Extra-": {"v"}}, &frontproxy.User{Name: "a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.hs.Read(tc.h); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			tc.hs.Strip(tc.h)
			if tc.hs.Read(tc.h) != nil || len(tc.h.Values("X-Group")) > 0 {
				t.Errorf("identity left after Strip: %v", tc.h)
			}
		})
	}
}
