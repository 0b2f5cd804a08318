package auditannotation

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Header holds one annotation per value, "key=value" with both parts
// query-escaped, as Warning headers hold one warning each.
const Header = "Kplane-Audit-Annotation"

// PatchPrefix begins the keys of the annotations that hold a mutating
// webhook's patch, a part of the request body, which kube records only in
// events at level Request and above. They are the only annotations kube
// gives a level above Metadata, so rather than carry a level in Header
// the gateway drops the keys with this prefix from events below Request.
const PatchPrefix = "patch.webhook.admission.k8s.io/"

type recorderKey struct{}

// recorder adds annotations to a response's headers, keeping the first
// value of each key, as kube's audit does.
type recorder struct {
	mu   sync.Mutex
	h    http.Header
	seen map[string]bool
}

// WithRecorder returns ctx recording the annotations Add is given into
// the response headers h; they must be recorded before the response
// starts.
func WithRecorder(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, recorderKey{}, &recorder{h: h, seen: map[string]bool{}})
}

// Add records the annotation key=value for the request of ctx; a key
// already recorded keeps its value, and without a recorder nothing is
// recorded.
func Add(ctx context.Context, key, value string) {
	r, ok := ctx.Value(recorderKey{}).(*recorder)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[key] {
		return
	}
	r.seen[key] = true
	r.h.Add(Header, url.QueryEscape(key)+"="+url.QueryEscape(value))
}

// Take returns the annotations in h and removes them from it; values
// that cannot be read are skipped.
func Take(h http.Header) map[string]string {
	values := h.Values(Header)
	if len(values) == 0 {
		return nil
	}
	h.Del(Header)
	out := make(map[string]string, len(values))
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok {
			continue
		}
		key, err1 := url.QueryUnescape(k)
		value, err2 := url.QueryUnescape(val)
		if err1 != nil || err2 != nil {
			continue
		}
		if _, dup := out[key]; !dup {
			out[key] = value
		}
	}
	return out
}
