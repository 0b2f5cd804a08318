package audit

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kplane.dev/services/gateway/internal/audit/policy"
)

// FailedAuthentication audits a request whose credentials were refused,
// once it was answered, as kube's failed-authentication audit does: the
// policy decides with no user, and the one event, at stage
// ResponseStarted, holds the answer's code and which credentials were
// tried.
func (a *Auditor) FailedAuthentication(c echo.Context) {
	r := c.Request()
	ra := from(r.Context())
	info := a.info(c)
	d := a.policy.Evaluate(policy.Attributes{Info: info})
	a.metrics.levels.WithLabelValues(string(d.Level)).Inc()
	if d.Level == auditv1.LevelNone || ra == nil {
		return
	}
	rec := &record{a: a, ra: ra, decision: d, ev: newEvent(r, ra, nil, info, d.Level)}
	rec.ev.ResponseStatus = &metav1.Status{Code: int32(c.Response().Status), Message: attemptedAuthentication(r)}
	rec.emit(auditv1.StageResponseStarted)
}

// attemptedAuthentication is kube's message naming the credentials a
// request carried.
func attemptedAuthentication(r *http.Request) string {
	var methods []string
	if _, _, ok := r.BasicAuth(); ok {
		methods = append(methods, "basic")
	}
	if parts := strings.Split(strings.TrimSpace(r.Header.Get("Authorization")), " "); len(parts) > 1 && strings.ToLower(parts[0]) == "bearer" {
		methods = append(methods, "bearer")
	}
	if strings.TrimSpace(r.URL.Query().Get("access_token")) != "" {
		methods = append(methods, "access_token")
	}
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		methods = append(methods, "x509")
	}
	if len(methods) == 0 {
		return "Authentication failed, no credentials provided"
	}
	return fmt.Sprintf("Authentication failed, attempted: %s", strings.Join(methods, ", "))
}
