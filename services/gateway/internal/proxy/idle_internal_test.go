package proxy

import (
	"crypto/tls"
	"net/url"
	"testing"

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
		for name, ht := range map[string]int64{"unary": int64(tg.unary.IdleConnTimeout), "streams": int64(tg.streams.IdleConnTimeout)} {
			if ht <= 0 || ht >= int64(serving.IdleTimeout) {
				t.Errorf("%s transport keeps idle connections %d ns, want less than the backends' %s", name, ht, serving.IdleTimeout)
			}
		}
	}
}
