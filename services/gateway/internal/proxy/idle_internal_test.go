package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"kplane.dev/libs/serving"
)

// The gateway drops an idle connection to a backend before the backend
// does: otherwise a write can go out on a connection the backend is
// closing, and it fails without being sent again.
func TestIdleConnectionsDroppedBeforeTheBackendDropsThem(t *testing.T) {
	tr, err := NewTransport([]*url.URL{{Scheme: "https", Host: "127.0.0.1:1"}}, &tls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range tr.targets {
		for name, ht := range map[string]int64{"unary": int64(tg.unary.IdleConnTimeout), "streams": int64(tg.streams.IdleConnTimeout), "direct": int64(tg.direct.idleTimeout)} {
			if ht <= 0 || ht >= int64(serving.IdleTimeout) {
				t.Errorf("%s transport keeps idle connections %d ns, want less than the backends' %s", name, ht, serving.IdleTimeout)
			}
		}
	}
}

// A connection left idle is closed when its time is up, not only when a
// request next looks at it, so connections a burst opened do not stay
// open, half closed by the backend, until the next burst.
func TestIdleUnaryConnectionsExpire(t *testing.T) {
	closed := make(chan struct{}, 1)
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed <- struct{}{}
		}
	}
	s.StartTLS()
	defer s.Close()
	cfg := s.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "127.0.0.1"
	c := newUnaryClient(cfg)
	c.idleTimeout = 10 * time.Millisecond
	defer c.closeIdle()
	req, err := http.NewRequest(http.MethodGet, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.roundTrip(req, s.Listener.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("an idle connection outlived its idle timeout")
	}
}
