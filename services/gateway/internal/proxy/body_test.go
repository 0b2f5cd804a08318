package proxy_test

import (
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/services/gateway/internal/proxy"
)

// A create's body reaches the replica in the TLS record of its headers,
// whatever reader the gateway's server gave it; a body too large to
// hold, or of unknown length, still streams whole, and one shorter than
// it said is the client's 400.
func TestBodiesGoOutWithTheirHeaders(t *testing.T) {
	var got atomic.Value
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("backend reading the body: %v", err)
		}
		got.Store(string(b))
	}))
	records := &recordCounter{}
	backend.Listener = &countingListener{Listener: backend.Listener, records: records}
	backend.StartTLS()
	defer backend.Close()
	tr := transportTo(t, backend)
	defer tr.CloseIdleConnections()
	log := slog.New(slog.DiscardHandler)
	u := &frontproxy.User{Name: "alice"}
	// The handshake's records are not the request's.
	proxy.Forward(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/api", nil), tr, u, log)
	small, large := strings.Repeat("x", 1024), strings.Repeat("y", 256<<10)
	for _, tc := range []struct {
		name    string
		body    string
		length  int64
		code    int
		records int64
	}{
		{name: "small", body: small, length: int64(len(small)), code: http.StatusOK, records: 1},
		{name: "large", body: large, length: int64(len(large)), code: http.StatusOK},
		{name: "length not declared", body: small, length: -1, code: http.StatusOK},
		{name: "shorter than declared", body: small, length: int64(len(small)) + 1, code: http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got.Store("")
			// A reader net/http does not know to be in memory, as the
			// body of a request the gateway's server received.
			r := httptest.NewRequest(http.MethodPost, "/api/v1/namespaces/default/configmaps", nil)
			r.Body, r.ContentLength = io.NopCloser(struct{ io.Reader }{strings.NewReader(tc.body)}), tc.length
			w := httptest.NewRecorder()
			before := records.count()
			proxy.Forward(w, r, tr, u, log)
			if w.Code != tc.code {
				t.Fatalf("answer %d %s, want %d", w.Code, w.Body, tc.code)
			}
			if tc.code != http.StatusOK {
				return
			}
			if got.Load() != tc.body {
				t.Errorf("backend got %d bytes, want %d", len(got.Load().(string)), len(tc.body))
			}
			if n := records.count() - before; tc.records != 0 && n != tc.records {
				t.Errorf("request came in %d TLS records, want %d", n, tc.records)
			}
		})
	}
}

// countingListener counts the TLS records its connections receive.
type countingListener struct {
	net.Listener
	records *recordCounter
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, records: l.records}, nil
}

type countingConn struct {
	net.Conn
	records *recordCounter
	// header holds a record header read in part; skip is what is left
	// of the current record's payload.
	header []byte
	skip   int
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	for b := p[:n]; len(b) > 0; {
		if c.skip > 0 {
			k := min(c.skip, len(b))
			c.skip, b = c.skip-k, b[k:]
			continue
		}
		k := min(5-len(c.header), len(b))
		c.header, b = append(c.header, b[:k]...), b[k:]
		if len(c.header) == 5 {
			c.skip = int(binary.BigEndian.Uint16(c.header[3:]))
			c.header = c.header[:0]
			c.records.add()
		}
	}
	return n, err
}

type recordCounter struct {
	mu sync.Mutex
	n  int64
}

func (r *recordCounter) add() {
	r.mu.Lock()
	r.n++
	r.mu.Unlock()
}

func (r *recordCounter) count() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}
