package storage_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"kplane.dev/libs/storage"
)

const continuePrefix = "/registry/configmaps/tenant-a/"

// FuzzDecodeContinue feeds the continue token parser what a client may
// send: whatever it accepts stays below the list's prefix, and what it
// issues it reads back unchanged.
func FuzzDecodeContinue(f *testing.F) {
	for _, raw := range []string{
		`{"v":"meta.k8s.io/v1","rv":5,"start":"b\u0000"}`,
		`{"v":"meta.k8s.io/v1","rv":5,"start":"../../secrets/"}`,
		`{"v":"meta.k8s.io/v1","rv":5,"start":"a/../../b"}`,
		`{"v":"meta.k8s.io/v1","rv":-1,"start":"a"}`,
		`{"v":"meta.k8s.io/v2","rv":1,"start":"a"}`,
		`{"v":"meta.k8s.io/v1","rv":1,"start":"/etc"}`,
		`{garbage`,
	} {
		f.Add(base64.RawURLEncoding.EncodeToString([]byte(raw)))
	}
	f.Add("%%%")
	f.Add("")
	f.Fuzz(func(t *testing.T, token string) {
		key, rv, err := storage.DecodeContinue(token, continuePrefix)
		if err != nil {
			if storage.CodeOf(err) != storage.ErrCodeInvalidRequest {
				t.Fatalf("a bad token %q: %v, want an invalid request", token, err)
			}
			return
		}
		start, ok := strings.CutPrefix(key, continuePrefix)
		if !ok || start == "" || strings.Contains("/"+start+"/", "/../") || strings.HasPrefix(start, "/") {
			t.Fatalf("token %q resumes at %q, outside %q", token, key, continuePrefix)
		}
		again, err := storage.EncodeContinue(key, continuePrefix, rv)
		if err != nil {
			t.Fatalf("re-encode %q at %d: %v", key, rv, err)
		}
		key2, rv2, err := storage.DecodeContinue(again, continuePrefix)
		if err != nil || key2 != key || rv2 != rv {
			t.Fatalf("round trip of %q at %d: %q at %d, %v", key, rv, key2, rv2, err)
		}
	})
}
