package filters_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"kplane.dev/services/gateway/internal/filters"
)

// untilDeadline answers with how long the request had left, or waits for
// its context to end when asked to.
func untilDeadline(c echo.Context) error {
	ctx := c.Request().Context()
	if c.QueryParam("block") == "true" {
		<-ctx.Done()
		return ctx.Err()
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return c.String(http.StatusOK, "no deadline")
	}
	return c.String(http.StatusOK, fmt.Sprint(time.Until(deadline) <= time.Hour))
}

func TestTimeout(t *testing.T) {
	const timedOut = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}` + "\n"
	tests := []struct {
		name    string
		timeout time.Duration
		target  string
		code    int
		body    string
	}{
		{name: "configured timeout", timeout: 20 * time.Millisecond, target: "/api/v1/namespaces/default/configmaps?block=true", code: 504, body: timedOut},
		{name: "shorter ?timeout= is honoured", timeout: time.Hour, target: "/api/v1/namespaces/default/configmaps?block=true&timeout=20ms", code: 504, body: timedOut},
		{name: "longer ?timeout= is capped", timeout: time.Hour, target: "/api/v1/namespaces/default/configmaps?timeout=5h", code: 200, body: "true"},
		{name: "zero ?timeout= is the default", timeout: time.Hour, target: "/api/v1/namespaces/default/configmaps?timeout=0s", code: 200, body: "true"},
		{name: "invalid ?timeout=", timeout: time.Hour, target: "/api/v1/namespaces/default/configmaps?timeout=abc", code: 400,
			body: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"invalid timeout specified in the request URL - time: invalid duration \"abc\"","reason":"BadRequest","code":400}` + "\n"},
		{name: "watch has no deadline", timeout: 20 * time.Millisecond, target: "/api/v1/namespaces/default/configmaps?watch=true", code: 200, body: "no deadline"},
		{name: "exec has no deadline", timeout: 20 * time.Millisecond, target: "/api/v1/namespaces/default/pods/p/exec", code: 200, body: "no deadline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := filters.DefaultConfig()
			cfg.RequestTimeout = tt.timeout
			f, _ := newFilters(t, cfg)
			rec := serve(newEcho(untilDeadline, f.Timeout()), http.MethodGet, tt.target, nil)
			if rec.Code != tt.code || rec.Body.String() != tt.body {
				t.Errorf("GET %s = %d %q, want %d %q", tt.target, rec.Code, rec.Body.String(), tt.code, tt.body)
			}
			if tt.code >= 400 {
				if got := rec.Header().Get("Content-Type"); got != "application/json" {
					t.Errorf("Content-Type = %q, want application/json", got)
				}
			}
		})
	}
}

// TestTimeoutAfterAnswerBegan checks that a response cut by the timeout
// is aborted rather than ended as if whole.
func TestTimeoutAfterAnswerBegan(t *testing.T) {
	cfg := filters.DefaultConfig()
	cfg.RequestTimeout = 20 * time.Millisecond
	f, _ := newFilters(t, cfg)
	e := newEcho(func(c echo.Context) error {
		c.Response().Header().Set("Content-Type", "application/json")
		c.Response().WriteHeader(http.StatusOK)
		_, _ = c.Response().Write([]byte(`{"items":[`))
		c.Response().Flush()
		<-c.Request().Context().Done()
		// Write until the timeout has taken the response, so that the
		// handler is still running when it does.
		for {
			if _, err := c.Response().Write([]byte(`{},`)); err != nil {
				return err
			}
		}
	}, f.Timeout())
	srv := httptest.NewServer(e)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/v1/configmaps")
	if err != nil {
		t.Fatalf("GET: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("read body = %q, %v; want it cut with an unexpected EOF", body, err)
	}
}

// TestTimeoutEndsBodyRead checks that a body trickling in does not hold
// its request past the timeout, over HTTP/1.1 and HTTP/2: the handler's
// read fails at the deadline, so the handler returns (and any
// max-in-flight slot it held is free), and the client has kube's 504.
func TestTimeoutEndsBodyRead(t *testing.T) {
	const timedOut = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Timeout: request did not complete within requested timeout - context deadline exceeded","reason":"Timeout","details":{},"code":504}` + "\n"
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			cfg := filters.DefaultConfig()
			cfg.RequestTimeout = 200 * time.Millisecond
			f, _ := newFilters(t, cfg)
			readErr := make(chan error, 1)
			srv := httptest.NewUnstartedServer(newEcho(func(c echo.Context) error {
				_, err := io.ReadAll(c.Request().Body)
				readErr <- err
				return err
			}, f.Timeout()))
			srv.EnableHTTP2 = h2
			srv.StartTLS()
			defer srv.Close()

			body, trickle := io.Pipe()
			defer func() { _ = trickle.Close() }()
			go func() {
				// One byte now and then, never the end.
				tick := time.NewTicker(50 * time.Millisecond)
				defer tick.Stop()
				for range tick.C {
					if _, err := trickle.Write([]byte("x")); err != nil {
						return
					}
				}
			}()
			req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/default/configmaps", body)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				resp *http.Response
				err  error
			}
			done := make(chan result, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				done <- result{resp, err}
			}()
			select {
			case err := <-readErr:
				if err == nil {
					t.Error("body read ended without an error")
				}
			case <-time.After(10 * time.Second):
				// Without a read deadline even the 504 waits for the
				// body; cutting the connection lets the server go.
				srv.CloseClientConnections()
				t.Fatal("the handler is still reading the body 10s after its timeout")
			}
			res := <-done
			if res.err != nil {
				t.Fatalf("POST: %v", res.err)
			}
			resp := res.resp
			defer func() { _ = resp.Body.Close() }()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusGatewayTimeout || string(got) != timedOut {
				t.Errorf("POST = %d %q, want 504 %q", resp.StatusCode, got, timedOut)
			}
			if resp.ProtoMajor != map[bool]int{false: 1, true: 2}[h2] {
				t.Errorf("served over %s", resp.Proto)
			}
		})
	}
}

// TestAnswerBeforeBody checks that an answer given without reading the
// body (a refusal) reaches an HTTP/1.1 client whose body is still
// trickling in at once, not at the request's deadline: the server would
// otherwise consume the body before writing the answer.
func TestAnswerBeforeBody(t *testing.T) {
	f, _ := newFilters(t, filters.DefaultConfig())
	srv := httptest.NewTLSServer(newEcho(func(c echo.Context) error {
		return c.String(http.StatusForbidden, "no")
	}, f.Timeout()))
	defer srv.Close()
	body, trickle := io.Pipe()
	defer func() { _ = trickle.Close() }()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/default/configmaps", body)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		_ = resp.Body.Close()
		done <- result{code: resp.StatusCode}
	}()
	select {
	case res := <-done:
		if res.err != nil || res.code != http.StatusForbidden {
			t.Errorf("POST = %d %v, want 403", res.code, res.err)
		}
	case <-time.After(10 * time.Second):
		srv.CloseClientConnections()
		t.Fatal("no answer 10s after the handler gave it, the body still arriving")
	}
}

// TestEarlyAnswerSaysClose: over HTTP/1.1, an answer given before the
// request body was read says the connection closes, so the client sends
// its next request on a new one instead of getting EOF; an answer after
// the whole body keeps the connection.
func TestEarlyAnswerSaysClose(t *testing.T) {
	f, _ := newFilters(t, filters.DefaultConfig())
	srv := httptest.NewTLSServer(newEcho(func(c echo.Context) error {
		if c.Request().URL.Query().Get("read") != "" {
			if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
				return err
			}
			return c.String(http.StatusCreated, "read")
		}
		return c.String(http.StatusForbidden, "no")
	}, f.Timeout()))
	defer srv.Close()
	for _, c := range []struct {
		query     string
		wantClose bool
	}{
		{"", true},
		{"?read=1", false},
	} {
		resp, err := srv.Client().Post(srv.URL+"/api/v1/namespaces/default/configmaps"+c.query, "application/json", strings.NewReader(strings.Repeat("x", 64<<10)))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.ProtoMajor != 1 {
			t.Fatalf("the test server spoke %s, want HTTP/1.1", resp.Proto)
		}
		if resp.Close != c.wantClose {
			t.Errorf("POST%s answered %d with Connection: close = %v, want %v", c.query, resp.StatusCode, resp.Close, c.wantClose)
		}
	}
}
