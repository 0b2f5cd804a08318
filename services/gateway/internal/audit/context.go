package audit

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	authnv1 "k8s.io/api/authentication/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"kplane.dev/libs/apiserver/auditannotation"
	"kplane.dev/libs/apiserver/frontproxy"
)

// requestAudit is what the filters inside the audit filter tell it about
// a request; it exists for every request, audited or not, so that they
// need not know.
type requestAudit struct {
	id       string
	received time.Time

	mu           sync.Mutex
	annotations  map[string]string
	impersonated *authnv1.UserInfo
	// fromBackend says the answer comes from a backend whose audit
	// annotations are recorded (core, crd).
	fromBackend bool
}

type requestKey struct{}

func from(ctx context.Context) *requestAudit {
	ra, _ := ctx.Value(requestKey{}).(*requestAudit)
	return ra
}

// ID is the audit ID of the request of ctx, "" outside the filters.
func ID(ctx context.Context) string {
	if ra := from(ctx); ra != nil {
		return ra.id
	}
	return ""
}

// AddAnnotations adds key/value pairs to the audit event of the request of
// ctx; a key already set keeps its value, as in kube.
func AddAnnotations(ctx context.Context, keysAndValues ...string) {
	ra := from(ctx)
	if ra == nil {
		return
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	for i := 0; i+1 < len(keysAndValues); i += 2 {
		ra.addLocked(keysAndValues[i], keysAndValues[i+1])
	}
}

func (ra *requestAudit) addLocked(k, v string) {
	if ra.annotations == nil {
		ra.annotations = map[string]string{}
	}
	if _, ok := ra.annotations[k]; !ok {
		ra.annotations[k] = v
	}
}

// SetImpersonatedUser records whom the request of ctx impersonates.
func SetImpersonatedUser(ctx context.Context, u *frontproxy.User) {
	ra := from(ctx)
	if ra == nil || u == nil {
		return
	}
	ui := userInfo(u)
	ra.mu.Lock()
	ra.impersonated = &ui
	ra.mu.Unlock()
}

// fill copies the annotations and the impersonated user into ev; below
// level Request it leaves out the mutating webhooks' patches, part of
// the request body, as kube does.
func (ra *requestAudit) fill(ev *auditv1.Event) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	var annotations map[string]string
	for k, v := range ra.annotations {
		if !atLeast(ev.Level, auditv1.LevelRequest) && strings.HasPrefix(k, auditannotation.PatchPrefix) {
			continue
		}
		if annotations == nil {
			annotations = make(map[string]string, len(ra.annotations))
		}
		annotations[k] = v
	}
	if annotations != nil {
		ev.Annotations = annotations
	}
	if ra.impersonated != nil {
		u := *ra.impersonated
		ev.ImpersonatedUser = &u
	}
}

func userInfo(u *frontproxy.User) authnv1.UserInfo {
	ui := authnv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		ui.Extra = make(map[string]authnv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			ui.Extra[k] = v
		}
	}
	return ui
}

// TrustBackend records the audit annotations the answer to the request
// of ctx carries: call it when a storage service of kplane (core, crd)
// answers, not an aggregated API server of a user, whose annotations
// are dropped as kube-aggregator drops them.
func TrustBackend(ctx context.Context) {
	if ra := from(ctx); ra != nil {
		ra.mu.Lock()
		ra.fromBackend = true
		ra.mu.Unlock()
	}
}

// WithID gives every request an audit ID, as kube's audit init filter
// does, audited or not: the client's Audit-ID header, else a new UUID. It
// is echoed in the Audit-ID response header and sent on to the backend so
// that its logs name the same request. It also takes the audit
// annotations a backend sends back out of the response, so that the
// client never sees them, and keeps them for the audit event.
func WithID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		ra := &requestAudit{id: r.Header.Get(auditv1.HeaderAuditID), received: time.Now()}
		if ra.id == "" {
			ra.id = uuid.NewString()
			r.Header.Set(auditv1.HeaderAuditID, ra.id)
		}
		resp := c.Response()
		if resp.Header().Get(auditv1.HeaderAuditID) == "" {
			resp.Header().Set(auditv1.HeaderAuditID, ra.id)
		}
		resp.Before(func() {
			annotations := auditannotation.Take(resp.Header())
			if len(annotations) == 0 {
				return
			}
			ra.mu.Lock()
			defer ra.mu.Unlock()
			if !ra.fromBackend {
				return
			}
			for k, v := range annotations {
				ra.addLocked(k, v)
			}
		})
		c.SetRequest(r.WithContext(context.WithValue(r.Context(), requestKey{}, ra)))
		return next(c)
	}
}
