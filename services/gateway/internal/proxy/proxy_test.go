package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/proxy"
)

// A backend that dies mid-answer ends a watch's stream as a finished
// response, which client-go takes as the watch's end, and aborts any
// other answer, which a client must not take as whole.
func TestBackendDyingMidAnswer(t *testing.T) {
	const event = `{"type":"ADDED","object":{"kind":"ConfigMap"}}` + "\n"
	backend := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, event)
		w.(http.Flusher).Flush()
		// What the client sees of a replica killed mid-stream: the
		// connection closes without the end of the body.
		panic(http.ErrAbortHandler)
	}))
	defer backend.Close()
	tr := transportTo(t, backend)
	for _, tc := range []struct {
		name     string
		forward  func(http.ResponseWriter, *http.Request, http.RoundTripper, *frontproxy.User, *slog.Logger)
		finished bool
	}{
		{name: "watch", forward: proxy.ForwardWatch, finished: true},
		{name: "other", forward: proxy.Forward, finished: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gateway := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.forward(w, r, tr, &frontproxy.User{Name: "alice"}, slog.New(slog.DiscardHandler))
			}))
			defer gateway.Close()
			resp, err := http.Get(gateway.URL + "/api/v1/configmaps?watch=true")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if string(body) != event {
				t.Errorf("body %q, want the event sent before the backend died", body)
			}
			if finished := err == nil; finished != tc.finished {
				t.Errorf("reading the answer: %v; want finished %v", err, tc.finished)
			}
		})
	}
}
