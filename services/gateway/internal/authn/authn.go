package authn

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/tracing"
	protoauthn "kplane.dev/proto/authn"
)

// Users and groups kube names itself.
const (
	// AllAuthenticated is given to every authenticated user.
	AllAuthenticated = "system:authenticated"
	// AllUnauthenticated is the group of the anonymous user.
	AllUnauthenticated = "system:unauthenticated"
	// Anonymous is the user of a request without credentials.
	Anonymous = "system:anonymous"
	// SystemMasters is the group admitted to everything.
	SystemMasters = "system:masters"
)

const (
	// DefaultAudience is kube-apiserver's API audience when none is set.
	DefaultAudience = "https://kubernetes.default.svc.cluster.local"
	// tokenCacheTTL is how long a successful token review is reused: short,
	// so that a revoked token stops working soon.
	tokenCacheTTL = 10 * time.Second
	// tokenCacheSize bounds the cached reviews.
	tokenCacheSize = 4096
	// bearerProtocolPrefix is kube's websocket subprotocol carrying a
	// base64url-encoded bearer token, for clients that cannot set headers.
	bearerProtocolPrefix = "base64url.bearer.authorization.k8s.io."
	protocolHeader       = "Sec-Websocket-Protocol"
)

// errInvalidToken is kube's reason for a bearer token nobody accepted.
var errInvalidToken = errors.New("invalid bearer token")

// RequestHeader configures kube's request-header authenticator: a client
// certificate of ClientCA with one of AllowedNames as CN vouches for the
// user named in Headers.
type RequestHeader struct {
	ClientCA     *x509.CertPool
	AllowedNames []string
	Headers      frontproxy.Headers
}

// Options configure an Authenticator.
type Options struct {
	// ClientCA verifies client certificates; nil disables them.
	ClientCA *x509.CertPool
	// RequestHeader enables the request-header authenticator when not nil.
	RequestHeader *RequestHeader
	// Audiences are the gateway's API audiences, sent with every token
	// review.
	Audiences []string
	// Anonymous lets requests without any credential in as
	// system:anonymous.
	Anonymous bool
	// Timeout bounds a token review; zero is natsrpc.DefaultTimeout.
	Timeout time.Duration
	Logger  *slog.Logger
	Clock   clock.PassiveClock
	// Tracing, when not nil, spans each authentication; Observer reports
	// the token reviews.
	Tracing  *tracing.Provider
	Observer *natsrpc.Observer
	// CacheMetrics records the token cache's lookups; nil records
	// nothing.
	CacheMetrics *metrics.CacheLookups
}

// Authenticator finds who sent a request.
type Authenticator struct {
	nc      *nats.Conn
	opts    Options
	log     *slog.Logger
	reviews *cache.LRUExpireCache
	// clientCerts and proxyCerts verify the certificates of ClientCA
	// and RequestHeader.ClientCA; nil when those are.
	clientCerts, proxyCerts *frontproxy.Verifier
	// generation counts flushes, so that a review started before one is
	// not cached after it.
	generation atomic.Uint64
}

// Flush forgets every cached token review, as when the reviews that would
// have told of a revocation may have been missed.
func (a *Authenticator) Flush() {
	a.generation.Add(1)
	a.reviews.RemoveAll(func(any) bool { return true })
}

// New returns the authenticator o describes, reviewing tokens over nc.
func New(nc *nats.Conn, o Options) *Authenticator {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Timeout <= 0 {
		o.Timeout = natsrpc.DefaultTimeout
	}
	a := &Authenticator{
		nc:      nc,
		opts:    o,
		log:     o.Logger,
		reviews: cache.NewLRUExpireCacheWithClock(tokenCacheSize, o.Clock),
	}
	if o.ClientCA != nil {
		a.clientCerts = frontproxy.NewVerifier(o.ClientCA)
	}
	if o.RequestHeader != nil {
		a.proxyCerts = frontproxy.NewVerifier(o.RequestHeader.ClientCA)
	}
	return a
}

// authenticator is one of the union: a nil user and nil error say the
// request carries no credential it knows.
type authenticator func(r *http.Request) (*frontproxy.User, error)

// Authenticate returns the user of r. As kube's union, the first
// authenticator to name a user wins; when none does, any error (a
// certificate that does not verify, a token authn refused) is a 401, and
// a request without credentials is anonymous if that is enabled. The
// credential that authenticated is removed from r.
func (a *Authenticator) Authenticate(r *http.Request) (*frontproxy.User, error) {
	in := r
	ctx, span := a.opts.Tracing.Start(r.Context(), scope, "authenticate", trace.WithSpanKind(trace.SpanKindInternal))
	if ctx != r.Context() {
		// Only a span costs a copy of the request.
		in = r.WithContext(ctx)
	}
	u, err := a.authenticate(in)
	if span.IsRecording() {
		if u != nil {
			span.SetAttributes(semconv.UserName(u.Name))
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	return u, err
}

// authenticate is Authenticate in its span; r shares the original's
// headers, so that a credential removed from it is removed from the
// original.
func (a *Authenticator) authenticate(r *http.Request) (*frontproxy.User, error) {
	var errs []error
	for _, auth := range []authenticator{a.requestHeader, a.x509, a.bearer, a.websocket} {
		u, err := auth(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if u != nil {
			return withAuthenticated(u), nil
		}
	}
	if len(errs) > 0 {
		a.log.Debug("authentication failed", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", errors.Join(errs...))
		return nil, Unauthorized()
	}
	if !a.opts.Anonymous {
		return nil, Unauthorized()
	}
	return &frontproxy.User{Name: Anonymous, Groups: []string{AllUnauthenticated}}, nil
}

// Unauthorized is kube's answer to a request without valid credentials.
func Unauthorized() error {
	return apierrors.NewUnauthorized("Unauthorized")
}

// withAuthenticated adds system:authenticated unless the user already is
// in it or in system:unauthenticated, as kube's group adder does.
func withAuthenticated(u *frontproxy.User) *frontproxy.User {
	if slices.Contains(u.Groups, AllAuthenticated) || slices.Contains(u.Groups, AllUnauthenticated) {
		return u
	}
	u.Groups = append(slices.Clone(u.Groups), AllAuthenticated)
	return u
}

// verify checks r's client certificate with v for client auth and
// returns it; nil without a certificate.
func verify(r *http.Request, v *frontproxy.Verifier) (*x509.Certificate, error) {
	cert, err := v.Verify(r)
	if errors.Is(err, frontproxy.ErrNoClientCertificate) {
		return nil, nil
	}
	return cert, err
}

func (a *Authenticator) x509(r *http.Request) (*frontproxy.User, error) {
	if a.clientCerts == nil {
		return nil, nil
	}
	cert, err := verify(r, a.clientCerts)
	if err != nil || cert == nil || cert.Subject.CommonName == "" {
		return nil, err
	}
	return &frontproxy.User{Name: cert.Subject.CommonName, Groups: slices.Clone(cert.Subject.Organization)}, nil
}

func (a *Authenticator) requestHeader(r *http.Request) (*frontproxy.User, error) {
	rh := a.opts.RequestHeader
	if rh == nil {
		return nil, nil
	}
	cert, err := verify(r, a.proxyCerts)
	if err != nil || cert == nil {
		return nil, err
	}
	if err := frontproxy.CheckAllowedName(cert, rh.AllowedNames); err != nil {
		return nil, err
	}
	u := rh.Headers.Read(r.Header)
	if u == nil {
		return nil, nil
	}
	rh.Headers.Strip(r.Header)
	return u, nil
}

// bearer reads the Authorization header as kube does: "Bearer <token>",
// anything else is no credential of a token's.
func (a *Authenticator) bearer(r *http.Request) (*frontproxy.User, error) {
	h := strings.TrimSpace(r.Header.Get("Authorization"))
	if h == "" {
		return nil, nil
	}
	parts := strings.SplitN(h, " ", 3)
	if len(parts) < 2 || !strings.EqualFold(parts[0], "bearer") || parts[1] == "" {
		return nil, nil
	}
	u, err := a.token(r.Context(), parts[1])
	if err != nil {
		return nil, err
	}
	r.Header.Del("Authorization")
	return u, nil
}

// websocket reads kube's bearer token subprotocol of a websocket upgrade,
// which must come with another subprotocol to echo back.
func (a *Authenticator) websocket(r *http.Request) (*frontproxy.User, error) {
	if !isWebSocket(r) {
		return nil, nil
	}
	var token string
	var seen bool
	var others []string
	for _, h := range r.Header.Values(protocolHeader) {
		for p := range strings.SplitSeq(h, ",") {
			p = strings.TrimSpace(p)
			encoded, ok := strings.CutPrefix(p, bearerProtocolPrefix)
			if !ok {
				others = append(others, p)
				continue
			}
			if seen {
				return nil, errors.New("multiple base64.bearer.authorization tokens specified")
			}
			seen = true
			decoded, err := base64.RawURLEncoding.DecodeString(encoded)
			if err != nil {
				return nil, errors.New("invalid base64.bearer.authorization token encoding")
			}
			if !utf8.Valid(decoded) {
				return nil, errors.New("invalid base64.bearer.authorization token")
			}
			token = string(decoded)
		}
	}
	if token == "" {
		return nil, nil
	}
	if len(others) == 0 {
		return nil, errors.New("missing additional subprotocol")
	}
	u, err := a.token(r.Context(), token)
	if err != nil {
		return nil, err
	}
	r.Header.Set(protocolHeader, strings.Join(others, ","))
	return u, nil
}

func isWebSocket(r *http.Request) bool {
	upgrade := false
	for _, h := range r.Header.Values("Connection") {
		for t := range strings.SplitSeq(h, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				upgrade = true
			}
		}
	}
	return upgrade && strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

// token asks authn who token is, reusing a success for tokenCacheTTL.
// The cache is keyed by the token's hash, so that the gateway's memory
// holds no token.
func (a *Authenticator) token(ctx context.Context, token string) (*frontproxy.User, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	v, hit := a.reviews.Get(key)
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("kplane.authentication.cache_hit", hit))
	a.opts.CacheMetrics.Lookup(hit)
	if hit {
		return clone(v.(*frontproxy.User)), nil
	}
	generation := a.generation.Load()
	ctx, cancel := context.WithTimeout(ctx, a.opts.Timeout)
	defer cancel()
	review := &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: a.opts.Audiences},
	}
	review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	var out authenticationv1.TokenReview
	if err := natsrpc.RequestJSON(ctx, a.nc, protoauthn.SubjectTokenReview, review, &out, natsrpc.Idempotent(), natsrpc.Observe(a.opts.Observer)); err != nil {
		a.log.Warn("token review failed", "err", err)
		return nil, fmt.Errorf("review token: %w", err)
	}
	st := out.Status
	if !st.Authenticated || st.User.Username == "" {
		return nil, errInvalidToken
	}
	if len(st.Audiences) > 0 && !slices.ContainsFunc(st.Audiences, func(aud string) bool { return slices.Contains(a.opts.Audiences, aud) }) {
		return nil, errInvalidToken
	}
	u := &frontproxy.User{Name: st.User.Username, UID: st.User.UID, Groups: slices.Clone(st.User.Groups)}
	for k, v := range st.User.Extra {
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[k] = slices.Clone(v)
	}
	// A review answered across a flush may be stale: used, not kept.
	if a.generation.Load() == generation {
		a.reviews.Add(key, clone(u), tokenCacheTTL)
	}
	return u, nil
}

// clone copies u so that later filters may change their copy.
func clone(u *frontproxy.User) *frontproxy.User {
	c := *u
	c.Groups = slices.Clone(u.Groups)
	if u.Extra != nil {
		c.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			c.Extra[k] = slices.Clone(v)
		}
	}
	return &c
}

// scope is the instrumentation scope of the gateway's authn spans.
const scope = "kplane.dev/services/gateway/internal/authn"
