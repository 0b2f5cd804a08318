package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
)

// Forward sends r to the backend behind rt as user u and streams the
// answer to w. A backend that cannot be reached is a 503 Status, as
// kube-aggregator answers.
func Forward(w http.ResponseWriter, r *http.Request, rt http.RoundTripper, u *frontproxy.User, log *slog.Logger) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The Transport picks the replica; the URL only has to be
			// well formed.
			pr.Out.URL.Scheme, pr.Out.URL.Host = "https", "backend"
			pr.Out.Host = ""
			SetIdentity(pr.Out.Header, u)
		},
		Transport: rt,
		// Every write reaches the client at once: watch events must not
		// wait in a buffer, and lists need not fit in one.
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				// The client is gone; nobody reads an answer.
				return
			}
			log.Warn("backend unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
			WriteStatus(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err)))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}

// SetIdentity replaces every identity the client may have sent in h (the
// front proxy headers, impersonation headers and credentials) with u's
// front proxy headers.
func SetIdentity(h http.Header, u *frontproxy.User) {
	StripIdentity(h)
	h.Set(frontproxy.UserHeader, u.Name)
	if u.UID != "" {
		h.Set(frontproxy.UIDHeader, u.UID)
	}
	for _, g := range u.Groups {
		h.Add(frontproxy.GroupHeader, g)
	}
	for k, vs := range u.Extra {
		for _, v := range vs {
			h.Add(frontproxy.ExtraHeaderPrefix+escapeExtraKey(k), v)
		}
	}
}

// StripIdentity removes from h what a client may send to speak for
// someone: front proxy headers, impersonation headers and the credential
// the gateway has already read, which backends must not see.
func StripIdentity(h http.Header) {
	for name := range h {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-remote-") || strings.HasPrefix(lower, "impersonate-") || lower == "authorization" {
			delete(h, name)
		}
	}
}

// escapeExtraKey percent-encodes what a header name cannot carry, as
// kube's front proxy does for extra keys such as
// "authentication.kubernetes.io/credential-id".
func escapeExtraKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if isTokenChar(c) && c != '%' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

func isTokenChar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&'*+-.^_`|~", c) >= 0
}

// WriteStatus writes err as kube's JSON Status with its code.
func WriteStatus(w http.ResponseWriter, err error) {
	st := apistatus.Status(err)
	body, merr := json.Marshal(st)
	if merr != nil {
		http.Error(w, st.Message, int(st.Code))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(int(st.Code))
	_, _ = w.Write(body)
}
