package authz

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/apiserver/requestinfo"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/tracing"
	protoauthz "kplane.dev/proto/authz"
)

// SystemMasters is kube's privileged group, allowed everything.
const SystemMasters = "system:masters"

// kube's webhook authorizer cache TTLs.
const (
	DefaultAuthorizedTTL   = 5 * time.Minute
	DefaultUnauthorizedTTL = 30 * time.Second
	// cacheSize bounds the cached decisions.
	cacheSize = 10000
)

// everyName ends the key of a decision for every name of a resource, in
// place of the name: such a decision is apart from those of requests that
// name no object (a list, a create), which RBAC decides differently.
const everyName = '*'

// Attributes are what a decision is asked about: kube's authorizer
// attributes.
type Attributes struct {
	User            *frontproxy.User
	Verb            string
	ResourceRequest bool
	// Path is the URL path of a non-resource request.
	Path        string
	Namespace   string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Name        string
}

// AttributesOf are the attributes of a request of u described by info.
func AttributesOf(u *frontproxy.User, info *requestinfo.Info) Attributes {
	return Attributes{
		User:            u,
		Verb:            info.Verb,
		ResourceRequest: info.IsResourceRequest,
		Path:            info.Path,
		Namespace:       info.Namespace,
		APIGroup:        info.APIGroup,
		APIVersion:      info.APIVersion,
		Resource:        info.Resource,
		Subresource:     info.Subresource,
		Name:            info.Name,
	}
}

// Decision is an answer: allowed or not, and authz's reason, which kube
// appends to its Forbidden message.
type Decision struct {
	Allowed bool
	Reason  string
}

// Options configure an Authorizer.
type Options struct {
	// AuthorizedTTL and UnauthorizedTTL are how long allowed and refused
	// decisions are reused; zero is kube's default.
	AuthorizedTTL   time.Duration
	UnauthorizedTTL time.Duration
	// Timeout bounds a review; zero is natsrpc.DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	Clock   clock.PassiveClock
	// Tracing, when not nil, spans each decision; Observer reports the
	// access reviews.
	Tracing  *tracing.Provider
	Observer *natsrpc.Observer
	// CacheMetrics records the decision cache's lookups; nil records
	// nothing.
	CacheMetrics *metrics.CacheLookups
}

// Authorizer answers decisions locally for system:masters and through
// authz for everyone else.
type Authorizer struct {
	nc   *nats.Conn
	opts Options
	log  *slog.Logger
	sub  *nats.Subscription
	// decisions holds allowed and refused decisions keyed by the review's
	// spec.
	decisions *cache.LRUExpireCache
	// generation counts invalidations, so that a review started before
	// one is not cached after it.
	generation atomic.Uint64
}

// New returns the Authorizer o describes, asking authz over nc, and
// subscribes to authz's invalidations: from its return on, an
// invalidation drops every cached decision. Close ends the subscription.
func New(nc *nats.Conn, o Options) (*Authorizer, error) {
	if o.AuthorizedTTL <= 0 {
		o.AuthorizedTTL = DefaultAuthorizedTTL
	}
	if o.UnauthorizedTTL <= 0 {
		o.UnauthorizedTTL = DefaultUnauthorizedTTL
	}
	if o.Timeout <= 0 {
		o.Timeout = natsrpc.DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	a := &Authorizer{nc: nc, opts: o, log: o.Logger, decisions: cache.NewLRUExpireCacheWithClock(cacheSize, o.Clock)}
	// Every gateway replica drops its own cache: a plain subscription,
	// not a queue group.
	sub, err := nc.Subscribe(protoauthz.SubjectInvalidate, func(m *nats.Msg) {
		var inv protoauthz.Invalidation
		_ = json.Unmarshal(m.Data, &inv)
		a.Flush()
		a.log.Debug("authorization cache flushed", "reason", inv.Reason)
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to %s: %w", protoauthz.SubjectInvalidate, err)
	}
	a.sub = sub
	return a, nil
}

// Close ends the invalidation subscription.
func (a *Authorizer) Close() error {
	if err := a.sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) && !errors.Is(err, nats.ErrBadSubscription) {
		return fmt.Errorf("unsubscribe from %s: %w", protoauthz.SubjectInvalidate, err)
	}
	return nil
}

// Flush drops every cached decision.
func (a *Authorizer) Flush() {
	a.generation.Add(1)
	a.decisions.RemoveAll(func(any) bool { return true })
}

// Authorize decides on attrs. An error means authz could not be asked
// (a 503 ServiceUnavailable when it is unreachable or too slow, else
// authz's own error) and nothing was decided.
func (a *Authorizer) Authorize(ctx context.Context, attrs Attributes) (Decision, error) {
	ctx, span := a.opts.Tracing.Start(ctx, scope, "authorize", trace.WithSpanKind(trace.SpanKindInternal))
	d, hit, err := a.authorize(ctx, attrs)
	if span.IsRecording() {
		decision := "deny"
		if d.Allowed {
			decision = "allow"
		}
		span.SetAttributes(
			semconv.UserName(userName(attrs.User)),
			attribute.String("kplane.authorization.verb", attrs.Verb),
			attribute.Bool("kplane.authorization.cache_hit", hit),
		)
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(attribute.String("kplane.authorization.decision", decision))
		}
	}
	span.End()
	return d, err
}

// authorize is Authorize in its span; hit says the decision was cached
// (a system:masters decision is made here, and counts as one).
func (a *Authorizer) authorize(ctx context.Context, attrs Attributes) (d Decision, hit bool, err error) {
	if attrs.User != nil && slices.Contains(attrs.User.Groups, SystemMasters) {
		return Decision{Allowed: true}, true, nil
	}
	// A decision authz says holds for every name is kept once for the
	// resource: deleting a thousand objects asks authz once, not a
	// thousand times.
	base := decisionKey(make([]byte, 0, 256), attrs)
	key := string(base)
	var everyNameKey string
	if attrs.ResourceRequest && attrs.Name != "" {
		key = string(appendField(base, attrs.Name))
		everyNameKey = string(append(base, everyName))
	}
	v, ok := a.decisions.Get(key)
	if !ok && everyNameKey != "" {
		v, ok = a.decisions.Get(everyNameKey)
	}
	a.opts.CacheMetrics.Lookup(ok)
	if ok {
		return v.(Decision), true, nil
	}
	generation := a.generation.Load()
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	var out authorizationv1.SubjectAccessReview
	if err := natsrpc.RequestJSON(ctx, a.nc, protoauthz.SubjectAccessReview, reviewOf(attrs), &out, natsrpc.Idempotent(), natsrpc.Observe(a.opts.Observer)); err != nil {
		a.log.Warn("access review failed", "user", userName(attrs.User), "verb", attrs.Verb, "err", err)
		return Decision{}, false, unavailable(err)
	}
	d = Decision{Allowed: out.Status.Allowed && !out.Status.Denied, Reason: out.Status.Reason}
	ttl := a.opts.UnauthorizedTTL
	if d.Allowed {
		ttl = a.opts.AuthorizedTTL
	}
	// A decision made before an invalidation may be stale: used, not
	// kept.
	if a.generation.Load() == generation {
		if everyNameKey != "" && out.Annotations[protoauthz.AnnotationEveryName] == "true" {
			key = everyNameKey
		}
		a.decisions.Add(key, d, ttl)
	}
	return d, false, nil
}

// decisionKey appends to b the key of the cached decision on attrs but
// for the object's name, which the caller appends (appendField) or
// replaces with everyName. Every string is written with its length and
// every list with its count, each ended by its own mark, so the key reads
// back one way only and two different requests never share it. Encoding
// the review as JSON instead made a cached decision cost five times as
// much.
func decisionKey(b []byte, attrs Attributes) []byte {
	if u := attrs.User; u != nil {
		b = append(b, 'u')
		b = appendField(b, u.Name)
		b = appendField(b, u.UID)
		b = appendCount(b, len(u.Groups))
		for _, g := range u.Groups {
			b = appendField(b, g)
		}
		b = appendCount(b, len(u.Extra))
		for _, k := range slices.Sorted(maps.Keys(u.Extra)) {
			b = appendField(b, k)
			b = appendCount(b, len(u.Extra[k]))
			for _, v := range u.Extra[k] {
				b = appendField(b, v)
			}
		}
	}
	b = appendField(b, attrs.Verb)
	if !attrs.ResourceRequest {
		return appendField(append(b, 'n'), attrs.Path)
	}
	b = append(b, 'r')
	for _, f := range []string{attrs.Namespace, attrs.APIGroup, attrs.APIVersion, attrs.Resource, attrs.Subresource} {
		b = appendField(b, f)
	}
	return b
}

// appendCount appends n, the length of a list, to a key, ended by '#'
// so that the digits of the first item's length cannot be read as part of
// it.
func appendCount(b []byte, n int) []byte {
	return append(strconv.AppendInt(b, int64(n), 10), '#')
}

// appendField appends s to a key as its length, a colon and s.
func appendField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// unavailable is err as the client sees it: authz not answering (no
// replica, or none in time) is a 503; an error authz sent is kept.
func unavailable(err error) error {
	var s apierrors.APIStatus
	if errors.As(err, &s) {
		switch s.Status().Code {
		case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return apierrors.NewServiceUnavailable("the authorization service is unavailable")
		}
		return err
	}
	return apierrors.NewInternalError(err)
}

func userName(u *frontproxy.User) string {
	if u == nil {
		return ""
	}
	return u.Name
}

// reviewOf is the SubjectAccessReview of attrs, as kube's webhook
// authorizer builds it.
func reviewOf(attrs Attributes) *authorizationv1.SubjectAccessReview {
	r := &authorizationv1.SubjectAccessReview{}
	r.APIVersion, r.Kind = "authorization.k8s.io/v1", "SubjectAccessReview"
	if u := attrs.User; u != nil {
		r.Spec.User, r.Spec.UID, r.Spec.Groups = u.Name, u.UID, u.Groups
		for k, v := range u.Extra {
			if r.Spec.Extra == nil {
				r.Spec.Extra = map[string]authorizationv1.ExtraValue{}
			}
			r.Spec.Extra[k] = v
		}
	}
	if attrs.ResourceRequest {
		r.Spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Namespace:   attrs.Namespace,
			Verb:        attrs.Verb,
			Group:       attrs.APIGroup,
			Version:     attrs.APIVersion,
			Resource:    attrs.Resource,
			Subresource: attrs.Subresource,
			Name:        attrs.Name,
		}
	} else {
		r.Spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: attrs.Path, Verb: attrs.Verb}
	}
	return r
}

// Forbidden is kube-apiserver's 403 for attrs, with authz's reason
// appended when it gave one.
func Forbidden(attrs Attributes, reason string) error {
	r := apistatus.Refused{User: userName(attrs.User), Verb: attrs.Verb, Path: attrs.Path}
	if attrs.ResourceRequest {
		r.Group, r.Resource, r.Subresource, r.Namespace, r.Name = attrs.APIGroup, attrs.Resource, attrs.Subresource, attrs.Namespace, attrs.Name
	}
	return apistatus.Forbidden(r, reason)
}

// scope is the instrumentation scope of the gateway's authz spans.
const scope = "kplane.dev/services/gateway/internal/authz"
