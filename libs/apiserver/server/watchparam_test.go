package server_test

import (
	"bufio"
	"net/http"
	"strings"
	"testing"
)

// TestWatchParameterServed serves a collection GET as a watch exactly when
// request info, and so the gateway's authorization, reads it as one.
func TestWatchParameterServed(t *testing.T) {
	f := newFixture(t, direct)
	f.seedConfigMap("ns", "a", nil, nil)
	client := &http.Client{Timeout: wait}
	for _, tc := range []struct {
		query string
		watch bool
	}{
		{"watch=yes", true},
		{"watch=1", true},
		{"watch=true", true},
		{"watch=TRUE", true},
		{"watch=t", true},
		{"watch=f", true},
		{"watch", true},
		{"watch=false", false},
		{"watch=FALSE", false},
		{"watch=0", false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			// resourceVersion=0 starts a watch with the object, so its
			// first line comes at once.
			resp, err := client.Get(f.url + "/api/v1/namespaces/ns/configmaps?resourceVersion=0&" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			line, err := bufio.NewReader(resp.Body).ReadString('\n')
			if err != nil && line == "" {
				t.Fatalf("read first line: %v", err)
			}
			gotWatch := strings.HasPrefix(line, `{"type":"ADDED"`)
			gotList := strings.Contains(line, `"kind":"ConfigMapList"`)
			if resp.StatusCode != http.StatusOK || gotWatch != tc.watch || gotList == tc.watch {
				t.Errorf("%d %s, want a watch: %v", resp.StatusCode, line, tc.watch)
			}
		})
	}
}
