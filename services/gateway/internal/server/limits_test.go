package server_test

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"

	"kplane.dev/libs/faultproxy"
	"kplane.dev/libs/pki"
	"kplane.dev/services/gateway/internal/server"
)

// allowWrites lets bob and carol do anything with configmaps in default,
// on top of allowBob.
func allowWrites(spec authorizationv1.SubjectAccessReviewSpec) authorizationv1.SubjectAccessReviewStatus {
	if ra := spec.ResourceAttributes; ra != nil && (spec.User == "bob" || spec.User == "carol") && ra.Resource == "configmaps" && ra.Namespace == "default" {
		return authorizationv1.SubjectAccessReviewStatus{Allowed: true}
	}
	return allowBob(spec)
}

// countingReader counts the bytes read from it.
type countingReader struct {
	mu sync.Mutex
	r  io.Reader
	n  int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *countingReader) count() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// zeros is an endless body.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// http1Client speaks HTTP/1.1 only, on connections of its own.
func (c *certs) http1Client(t *testing.T, cert *pki.Cert) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: c.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{cert.TLSCertificate()}
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   cfg,
		TLSNextProto:      map[string]func(string, *tls.Conn) http.RoundTripper{},
		DisableKeepAlives: true,
	}}
}

// do sends a request as bob and returns the answer.
func do(t *testing.T, client *http.Client, method, url string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Authorization", "Bearer bobtoken")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer of %s %s: %v", method, url, err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestRequestBodies checks the limit on every body the gateway forwards:
// a GET's body, however large, is neither read nor forwarded and the GET
// is answered as usual; a write, resource or not, over kube's 3 MiB is
// kube's 413, whether its length is declared or chunked.
func TestRequestBodies(t *testing.T) {
	in := start(t, 1, nil)
	in.auth.setPolicy(allowWrites)
	const tooLarge = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Request entity too large: limit is 3145728","reason":"RequestEntityTooLarge","code":413}`
	clients := map[string]*http.Client{"HTTP/2": in.certs.httpClient(t, nil), "HTTP/1.1": in.certs.http1Client(t, nil)}
	for proto, client := range clients {
		t.Run(proto, func(t *testing.T) {
			t.Run("GET with a 200 MiB body", func(t *testing.T) {
				body := &countingReader{r: io.LimitReader(zeros{}, 200<<20)}
				code, answer := do(t, client, http.MethodGet, in.gw.URL+"/api/v1/namespaces/default/configmaps", body, -1)
				if code != http.StatusOK || !strings.Contains(answer, `"kind":"ConfigMapList"`) {
					t.Errorf("GET = %d %.200s, want the list", code, answer)
				}
				if n := body.count(); n > 16<<20 {
					t.Errorf("the gateway took %d MiB of a GET's body, want it left unread", n>>20)
				}
			})
			for _, tt := range []struct {
				name, method, path string
				chunked            bool
			}{
				{"chunked create", http.MethodPost, "/api/v1/namespaces/default/configmaps", true},
				{"create of declared length", http.MethodPost, "/api/v1/namespaces/default/configmaps", false},
				{"non-resource write of declared length", http.MethodPost, "/foo", false},
				{"chunked delete options", http.MethodDelete, "/api/v1/namespaces/default/configmaps/a", true},
			} {
				t.Run(tt.name+" over the limit", func(t *testing.T) {
					if !tt.chunked && proto == "HTTP/1.1" {
						// An HTTP/1.1 client still sending what the
						// gateway refused unread may see the connection
						// reset before the answer, as with kube.
						t.Skip("HTTP/2 only")
					}
					// Just past the limit, so that an HTTP/1.1 client has
					// sent all of it when the answer comes.
					size := int64(3<<20 + 4<<10)
					body := &countingReader{r: io.LimitReader(zeros{}, size)}
					length := size
					if tt.chunked {
						length = -1
					}
					if code, answer := do(t, client, tt.method, in.gw.URL+tt.path, body, length); code != http.StatusRequestEntityTooLarge || answer != tooLarge {
						t.Errorf("%s %s = %d %.300s, want %s", tt.method, tt.path, code, answer, tooLarge)
					}
				})
			}
			t.Run("chunked create under the limit is forwarded whole", func(t *testing.T) {
				name := strings.NewReplacer("/", "-", ".", "-").Replace(strings.ToLower(proto))
				prefix := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q},"data":{"a":"`, name)
				cm := prefix + strings.Repeat("x", 512<<10) + `"}}`
				code, answer := do(t, client, http.MethodPost, in.gw.URL+"/api/v1/namespaces/default/configmaps", io.MultiReader(strings.NewReader(cm)), -1)
				if code != http.StatusCreated {
					t.Errorf("chunked create of 512 KiB = %d %.300s, want 201", code, answer)
				}
			})
		})
	}
}

// trickler is a write whose body arrives a byte at a time and never ends.
type trickler struct {
	done chan struct{}
	code int
	body string
	err  error
	stop func()
}

// trickle starts a write of token (anonymous when empty) on a connection
// of its own.
func trickle(in *installation, client *http.Client, path, token string) *trickler {
	pr, pw := io.Pipe()
	tr := &trickler{done: make(chan struct{}), stop: func() { _ = pw.CloseWithError(io.ErrUnexpectedEOF) }}
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		if _, err := io.WriteString(pw, `{"apiVersion":"v1",`); err != nil {
			return
		}
		for range tick.C {
			if _, err := pw.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(tr.done)
		req, err := http.NewRequest(http.MethodPost, in.gw.URL+path, pr)
		if err != nil {
			tr.err = err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			tr.err = err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		tr.code, tr.body, tr.err = resp.StatusCode, strings.TrimSpace(string(b)), err
	}()
	return tr
}

// TestTricklers reproduces the slow-body attack on max-in-flight with 200
// anonymous and 200 authorized clients trickling write bodies against a
// limit of 5 mutating requests: the anonymous ones are refused at once
// without taking a slot, the authorized ones that got a slot lose it at
// their request's timeout, and ordinary writes go through all along.
func TestTricklers(t *testing.T) {
	in := start(t, 1, func(o *server.Options) { o.Filters.MaxMutatingRequestsInFlight = 5 })
	in.auth.setPolicy(allowWrites)
	client := in.certs.http1Client(t, nil)
	const n = 200
	var all []*trickler
	t.Cleanup(func() {
		for _, tr := range all {
			tr.stop()
		}
	})
	write := func(t *testing.T, name string) {
		t.Helper()
		cm := fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name)
		if code, answer := do(t, in.certs.httpClient(t, nil), http.MethodPost, in.gw.URL+"/api/v1/namespaces/default/configmaps", strings.NewReader(cm), int64(len(cm))); code != http.StatusCreated {
			t.Errorf("ordinary write = %d %s, want 201", code, answer)
		}
	}

	t.Run("anonymous writes are refused at once", func(t *testing.T) {
		var anonymous []*trickler
		for range n {
			anonymous = append(anonymous, trickle(in, client, "/api/v1/namespaces/default/configmaps", ""))
		}
		all = append(all, anonymous...)
		const forbidden = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"system:anonymous\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"default\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`
		// Well before the request timeout of a minute, which is when
		// they would be answered if their bodies were waited for.
		deadline := time.After(30 * time.Second)
		for i, tr := range anonymous {
			select {
			case <-tr.done:
			case <-deadline:
				t.Fatalf("anonymous trickler %d not answered in 30s", i)
			}
			if tr.err != nil || tr.code != http.StatusForbidden || tr.body != forbidden {
				t.Fatalf("anonymous trickler %d = %d %q %v, want %s", i, tr.code, tr.body, tr.err, forbidden)
			}
		}
		write(t, "during-anonymous")
	})

	t.Run("slots held by slow bodies are free at the timeout", func(t *testing.T) {
		var bobs []*trickler
		for range n {
			bobs = append(bobs, trickle(in, client, "/api/v1/namespaces/default/configmaps?timeout=3s", "bobtoken"))
		}
		all = append(all, bobs...)
		const timedOut = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}`
		codes := map[int]int{}
		deadline := time.After(60 * time.Second)
		for i, tr := range bobs {
			select {
			case <-tr.done:
			case <-deadline:
				t.Fatalf("bob's trickler %d not answered in 60s", i)
			}
			if tr.err != nil {
				t.Fatalf("bob's trickler %d: %v", i, tr.err)
			}
			codes[tr.code]++
			if tr.code == http.StatusGatewayTimeout && tr.body != timedOut {
				t.Errorf("bob's trickler %d = %q, want %s", i, tr.body, timedOut)
			}
		}
		if codes[http.StatusGatewayTimeout] == 0 || codes[http.StatusGatewayTimeout]+codes[http.StatusTooManyRequests] != n {
			t.Errorf("bob's tricklers were answered %v, want timeouts for those that got a slot and 429 for the rest", codes)
		}
		write(t, "after-bob")
	})
}

// TestLongRunningPerUser opens watches up to the per-user limit: one
// more of the same user is kube's 429 with Retry-After, while another
// user and system:masters still watch, and a closed watch frees its
// place.
func TestLongRunningPerUser(t *testing.T) {
	in := start(t, 1, func(o *server.Options) { o.Filters.MaxLongRunningRequestsPerUser = 2 })
	in.auth.setPolicy(allowWrites)
	carol := in.certs.client(t, "carol", "developers")
	const watchPath = "/api/v1/namespaces/default/configmaps?watch=true"
	watch := func(t *testing.T, cert *pki.Cert, token string) *http.Response {
		t.Helper()
		client := in.certs.httpClient(t, cert)
		req, err := http.NewRequest(http.MethodGet, in.gw.URL+watchPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		t.Cleanup(func() { _ = resp.Body.Close() })
		return resp
	}
	first := watch(t, nil, "bobtoken")
	for _, resp := range []*http.Response{first, watch(t, nil, "bobtoken")} {
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("bob's watch = %d, want 200", resp.StatusCode)
		}
	}
	t.Run("one more of bob's", func(t *testing.T) {
		resp := watch(t, nil, "bobtoken")
		b, _ := io.ReadAll(resp.Body)
		const tooMany = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","details":{"retryAfterSeconds":1},"code":429}`
		if resp.StatusCode != http.StatusTooManyRequests || strings.TrimSpace(string(b)) != tooMany || resp.Header.Get("Retry-After") != "1" {
			t.Errorf("third watch = %d %s, Retry-After %q; want 429 %s with Retry-After 1", resp.StatusCode, b, resp.Header.Get("Retry-After"), tooMany)
		}
	})
	t.Run("bob's short requests", func(t *testing.T) {
		if code, answer := do(t, in.certs.httpClient(t, nil), http.MethodGet, in.gw.URL+"/api/v1/namespaces/default/configmaps", nil, 0); code != http.StatusOK {
			t.Errorf("list = %d %s", code, answer)
		}
	})
	t.Run("other users", func(t *testing.T) {
		if resp := watch(t, carol, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("carol's watch = %d, want 200", resp.StatusCode)
		}
		if resp := watch(t, in.admin, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("admin's watch = %d, want 200", resp.StatusCode)
		}
	})
	t.Run("a closed watch frees its place", func(t *testing.T) {
		if err := first.Body.Close(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool {
			resp := watch(t, nil, "bobtoken")
			if resp.StatusCode == http.StatusOK {
				return true
			}
			_ = resp.Body.Close()
			return false
		})
	})
}

// TestNATSDropFlushesCaches cuts the gateway's NATS connection while a
// role is revoked, so that authz's invalidation never reaches it: once
// the connection is back, the revoked decision and the cached token
// review are not served from the caches.
func TestNATSDropFlushesCaches(t *testing.T) {
	var link *faultproxy.Proxy
	in := start(t, 1, func(o *server.Options) {
		link = faultproxy.Start(t, strings.TrimPrefix(o.NATS.URL, "nats://"))
		o.NATS.URL = "nats://" + link.Addr()
	})
	in.auth.setPolicy(allowBob)
	cmPath := "/api/v1/namespaces/y/configmaps"
	if code, body, _ := in.get(t, nil, "bobtoken", cmPath, nil); code != http.StatusOK {
		t.Fatalf("bob lists configmaps: %d %s", code, body)
	}
	tokenReviews := in.auth.tokenReviews.Load()

	link.Cut()
	waitFor(t, func() bool {
		return in.gw.logged("nats connection lost, authentication and authorization caches flushed")
	})
	in.auth.setPolicy(publicPaths)
	in.auth.invalidate(t)
	link.Restore()
	waitFor(t, func() bool {
		return in.gw.logged("nats connection back, authentication and authorization caches flushed")
	})

	code, body, _ := in.get(t, nil, "bobtoken", cmPath, nil)
	want := `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"configmaps is forbidden: User \"bob\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"y\"","reason":"Forbidden","details":{"kind":"configmaps"},"code":403}`
	if code != http.StatusForbidden || strings.TrimSpace(string(body)) != want {
		t.Errorf("bob after the reconnect: %d %s\nwant 403 %s", code, body, want)
	}
	if got := in.auth.tokenReviews.Load(); got != tokenReviews+1 {
		t.Errorf("%d token reviews after the reconnect, want 1: bob's token is reviewed again", got-tokenReviews)
	}
}
