package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"

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
			frontproxy.SetHeaders(pr.Out.Header, u)
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
			// The request's own body may fail it: a body over the
			// gateway's limit carries kube's 413.
			var st apierrors.APIStatus
			if errors.As(err, &st) {
				if werr := apistatus.WriteHTTP(w, err); werr != nil {
					log.Debug("write request error", "err", werr)
				}
				return
			}
			log.Warn("backend unreachable", "method", r.Method, "path", r.URL.Path, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewServiceUnavailable(fmt.Sprintf("error trying to reach service: %v", err))); werr != nil {
				log.Debug("write backend error", "err", werr)
			}
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	rp.ServeHTTP(w, r)
}
