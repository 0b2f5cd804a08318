package security

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Wants that are not one code: anyRefusal accepts any 4xx Status, for
// input kube itself answers with a 500 (a resourceVersion that is no
// number, a bogus strategic merge directive, delete options that do not
// parse) or refuses by another route (an encoded slash in a name);
// anyAnswer accepts anything but a 5xx, for input kube accepts.
const (
	anyRefusal = -1
	anyAnswer  = -2
)

// malformedInput sends input that is wrong in every way a parser can meet
// to every kind of endpoint: each is refused with kube's code and a
// Status, none reaches a 500, and the gateway stays ready.
func (w *world) malformedInput(t *testing.T) {
	w.admin(t, http.MethodPost, "/api/v1/namespaces/tenant-a/configmaps",
		strings.NewReader(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"},"data":{"a":"b"}}`), "application/json")
	const cms = "/api/v1/namespaces/tenant-a/configmaps"
	const target = cms + "/target"
	deep := strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000)
	continueToken := func(raw string) string { return url.QueryEscape(base64.RawURLEncoding.EncodeToString([]byte(raw))) }
	for _, c := range []struct {
		name, method, path, contentType, body string
		want                                  int
	}{
		{"truncated JSON", http.MethodPost, cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap",`, http.StatusBadRequest},
		{"a JSON array", http.MethodPost, cms, "application/json", `[]`, http.StatusBadRequest},
		{"JSON nested 100,000 deep", http.MethodPost, cms, "application/json", deep, http.StatusBadRequest},
		{"an unknown field under Strict", http.MethodPost, cms + "?fieldValidation=Strict", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"strict"},"bogus":1}`, http.StatusBadRequest},
		{"a duplicate field under Strict", http.MethodPost, cms + "?fieldValidation=Strict", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup","name":"dup2"}}`, http.StatusBadRequest},
		{"an unknown fieldValidation", http.MethodPost, cms + "?fieldValidation=Loose", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"loose"}}`, http.StatusUnprocessableEntity},
		{"broken YAML", http.MethodPost, cms, "application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: [", http.StatusBadRequest},
		{"garbage protobuf", http.MethodPost, cms, "application/vnd.kubernetes.protobuf", "\x00\x01\x02garbage", http.StatusBadRequest},
		{"protobuf with kube's magic and garbage", http.MethodPost, cms, "application/vnd.kubernetes.protobuf", "k8s\x00\xff\xff\xff\xff\x0f", http.StatusBadRequest},
		{"an unsupported media type", http.MethodPost, cms, "text/plain", "hello", http.StatusUnsupportedMediaType},
		{"an invalid name", http.MethodPost, cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"Bad_Name"}}`, http.StatusUnprocessableEntity},
		{"a name of 300 characters", http.MethodPost, cms, "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + strings.Repeat("a", 300) + `"}}`, http.StatusUnprocessableEntity},
		{"a kind that is not the URL's", http.MethodPost, cms, "application/json", `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"kind"}}`, http.StatusBadRequest},
		{"a namespace that is not the URL's", http.MethodPost, cms, "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ns","namespace":"tenant-b"}}`, http.StatusBadRequest},
		{"a name that is not the URL's", http.MethodPut, target, "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"other"}}`, http.StatusBadRequest},
		{"a stale resourceVersion", http.MethodPut, target, "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target","resourceVersion":"1"}}`, http.StatusConflict},
		{"a resourceVersion that is no number", http.MethodPut, target, "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target","resourceVersion":"abc"}}`, anyRefusal},
		{"a label selector that does not parse", http.MethodGet, cms + "?labelSelector=" + url.QueryEscape("a=(b"), "", "", http.StatusBadRequest},
		{"a field selector on an unknown field", http.MethodGet, cms + "?fieldSelector=spec.bogus%3Dx", "", "", http.StatusBadRequest},
		{"a field selector that does not parse", http.MethodGet, cms + "?fieldSelector=" + url.QueryEscape("a==="), "", "", http.StatusBadRequest},
		{"a continue token that is no base64", http.MethodGet, cms + "?limit=1&continue=%25%25%25", "", "", http.StatusBadRequest},
		{"a continue token of garbage JSON", http.MethodGet, cms + "?limit=1&continue=" + continueToken("{garbage"), "", "", http.StatusBadRequest},
		{"a continue token that climbs out of the keyspace", http.MethodGet,
			cms + "?limit=1&continue=" + continueToken(`{"v":"meta.k8s.io/v1","rv":1,"start":"../../../secrets/"}`), "", "", http.StatusBadRequest},
		{"a list resourceVersion that is no number", http.MethodGet, cms + "?resourceVersion=abc", "", "", anyRefusal},
		{"an unknown resourceVersionMatch", http.MethodGet, cms + "?resourceVersion=1&resourceVersionMatch=Bogus", "", "", http.StatusUnprocessableEntity},
		{"a timeout that is no duration", http.MethodGet, target + "?timeout=abc", "", "", http.StatusBadRequest},
		{"watch timeoutSeconds that is no number", http.MethodGet, cms + "?watch=1&timeoutSeconds=abc", "", "", http.StatusBadRequest},
		{"an unknown dryRun", http.MethodPost, cms + "?dryRun=Bogus", "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dry"}}`, http.StatusUnprocessableEntity},
		{"a fieldManager of 200 characters", http.MethodPost, cms + "?fieldManager=" + strings.Repeat("m", 200), "application/json",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"fm"}}`, http.StatusUnprocessableEntity},
		{"a JSON patch that is no JSON", http.MethodPatch, target, "application/json-patch+json", `[{"op":`, http.StatusBadRequest},
		{"a JSON patch with an unknown op", http.MethodPatch, target, "application/json-patch+json", `[{"op":"bogus","path":"/data/a"}]`, http.StatusUnprocessableEntity},
		{"a JSON patch replacing the root", http.MethodPatch, target, "application/json-patch+json", `[{"op":"replace","path":"","value":1}]`, anyAnswer},
		{"a JSON patch removing what is not there", http.MethodPatch, target, "application/json-patch+json", `[{"op":"remove","path":"/data/nothing/deeper"}]`, http.StatusUnprocessableEntity},
		{"a merge patch that is a string", http.MethodPatch, target, "application/merge-patch+json", `"string"`, http.StatusBadRequest},
		{"a strategic patch with a bogus directive", http.MethodPatch, target, "application/strategic-merge-patch+json", `{"$patch":"explode"}`, anyRefusal},
		{"an apply of broken YAML", http.MethodPatch, target + "?fieldManager=m", "application/apply-patch+yaml", "metadata: [", http.StatusBadRequest},
		{"an apply without a fieldManager", http.MethodPatch, target, "application/apply-patch+yaml",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"target"}}`, http.StatusUnprocessableEntity},
		{"a patch of an unsupported type", http.MethodPatch, target, "application/json", `{}`, http.StatusUnsupportedMediaType},
		{"delete options that are no JSON", http.MethodDelete, target, "application/json", `{`, http.StatusBadRequest},
		{"a delete with a uid precondition that does not hold", http.MethodDelete, target, "application/json",
			`{"apiVersion":"v1","kind":"DeleteOptions","preconditions":{"uid":"not-the-uid"}}`, http.StatusConflict},
		{"a name with an encoded slash", http.MethodGet, cms + "/a%2Fb", "", "", anyRefusal},
		{"a name of 1000 characters", http.MethodGet, cms + "/" + strings.Repeat("a", 1000), "", "", http.StatusNotFound},
		// kube authorizes before it routes: a tenant learns nothing of
		// what exists.
		{"an unknown resource", http.MethodGet, "/api/v1/namespaces/tenant-a/bogus", "", "", http.StatusForbidden},
		{"an unknown group", http.MethodGet, "/apis/bogus.example.com/v1/things", "", "", http.StatusForbidden},
	} {
		var body io.Reader
		if c.body != "" {
			body = strings.NewReader(c.body)
		}
		r := w.doWithin(t, 20*time.Second, writer, c.method, c.path, body, c.contentType)
		s := r.status()
		switch {
		case r.code == 0:
			t.Errorf("%s: no answer: %s", c.name, r.body)
		case r.code >= 500:
			t.Errorf("%s: %d %.300s", c.name, r.code, r.body)
		case c.want == anyAnswer:
		case c.want == anyRefusal && (r.code < 400 || s.Code != int32(r.code)):
			t.Errorf("%s: %d %.300s, want a 4xx Status", c.name, r.code, r.body)
		case c.want > 0 && (r.code != c.want || s.Code != int32(c.want)):
			t.Errorf("%s: %d %.300s, want a Status %d", c.name, r.code, r.body, c.want)
		}
	}

	for _, path := range []string{"/api/v1/namespaces/tenant-a/bogus", "/apis/bogus.example.com/v1/things", "/apis/bogus.example.com/v1/namespaces/tenant-a/things/x"} {
		expectStatus(t, "the admin asking for "+path, w.admin(t, http.MethodGet, path, nil, ""), http.StatusNotFound, "NotFound")
	}

	// Headers over kube's 1 MiB are refused before anything reads them.
	req := w.request(t, writer, http.MethodGet, cms, nil, "")
	req.Header.Set("X-Padding", strings.Repeat("p", 2<<20))
	resp, err := w.client.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("2 MiB of headers: %d, want 431", resp.StatusCode)
		}
	}
	// An Accept nothing satisfies.
	req = w.request(t, writer, http.MethodGet, target, nil, "")
	req.Header.Set("Accept", "application/bogus")
	expectStatus(t, "an Accept of application/bogus", w.send(t, req), http.StatusNotAcceptable, "NotAcceptable")

	if r := w.admin(t, http.MethodGet, "/readyz", nil, ""); r.code != http.StatusOK {
		t.Errorf("the gateway after malformed input: /readyz %d %s", r.code, r.body)
	}
	if r := w.admin(t, http.MethodGet, target, nil, ""); r.code != http.StatusOK || !strings.Contains(string(r.body), `"a":"b"`) {
		t.Errorf("the target after malformed writes: %d %s", r.code, r.body)
	}
}

// slowHeaders: connections that send their headers a byte at a time do
// not keep anyone else from being served.
func (w *world) slowHeaders(t *testing.T) {
	const slow = 300
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	cfg := w.client.Transport.(*http.Transport).TLSClientConfig.Clone()
	addr := strings.TrimPrefix(w.sys.URL(), "https://")
	for range slow {
		wg.Go(func() {
			conn, err := tls.Dial("tcp", addr, cfg)
			if err != nil {
				return
			}
			defer conn.Close()
			go func() { <-ctx.Done(); conn.Close() }()
			if _, err := io.WriteString(conn, "GET /api HTTP/1.1\r\nHost: kplane\r\nX-Slow: "); err != nil {
				return
			}
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(500 * time.Millisecond):
				}
				if _, err := io.WriteString(conn, "a"); err != nil {
					return
				}
			}
		})
	}
	for i := range 20 {
		r := w.doWithin(t, 10*time.Second, viewer, http.MethodGet, fmt.Sprintf("/api/v1/namespaces/tenant-a/configmaps?limit=%d", i+1), nil, "")
		if r.code != http.StatusOK {
			t.Fatalf("a list while %d clients trickle their headers: %d %s", slow, r.code, r.body)
		}
	}
}
