package serviceaccount

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/utils/clock"

	"kplane.dev/services/authn/internal/authenticator"
)

// Leeway is the clock skew allowed when checking exp, nbf and iat, and how
// long a deleted object's tokens stay valid after its deletion timestamp.
const Leeway = time.Minute

// What kube-apiserver answers when no key verifies a token's signature.
// kube verifies with go-jose, whose error this is; clients and audit logs see
// the same text from kplane.
var errSignature = errors.New("go-jose/go-jose: error in cryptographic primitive")

// The signature algorithms kube-apiserver's signers produce.
var allowedAlgs = map[string]jwt.SigningMethod{
	jwt.SigningMethodRS256.Alg(): jwt.SigningMethodRS256,
	jwt.SigningMethodES256.Alg(): jwt.SigningMethodES256,
	jwt.SigningMethodES384.Alg(): jwt.SigningMethodES384,
	jwt.SigningMethodES512.Alg(): jwt.SigningMethodES512,
}

// Authenticator authenticates ServiceAccount JWTs of a set of issuers.
type Authenticator struct {
	issuers      map[string]bool
	keys         PublicKeysGetter
	implicitAuds authenticator.Audiences
	validate     func(ctx context.Context, token string, c *Claims) (*info, error)
	clock        clock.PassiveClock
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithClock sets the clock that expiry and deletion are checked against.
func WithClock(c clock.PassiveClock) Option {
	return func(a *Authenticator) { a.clock = c }
}

// NewAuthenticator authenticates bound tokens of the given issuers, verified
// with keys. implicitAuds are the server's own audiences: the audiences a
// token must be valid for when the caller names none (the API server's
// --api-audiences). The service account and any bound object are looked up
// with getter on every authentication.
func NewAuthenticator(issuers []string, keys PublicKeysGetter, implicitAuds authenticator.Audiences, getter Getter, opts ...Option) (*Authenticator, error) {
	a, err := newAuthenticator(issuers, keys, implicitAuds, getter, opts)
	if err != nil {
		return nil, err
	}
	v := &boundValidator{getter: getter, clock: a.clock}
	a.validate = v.validate
	return a, nil
}

// NewLegacyAuthenticator authenticates legacy secret-based tokens (issuer
// kubernetes/serviceaccount), each valid while its Secret holds it and its
// service account exists with the same uid.
func NewLegacyAuthenticator(keys PublicKeysGetter, implicitAuds authenticator.Audiences, getter Getter, opts ...Option) (*Authenticator, error) {
	a, err := newAuthenticator([]string{LegacyIssuer}, keys, implicitAuds, getter, opts)
	if err != nil {
		return nil, err
	}
	v := &legacyValidator{getter: getter}
	a.validate = v.validate
	return a, nil
}

func newAuthenticator(issuers []string, keys PublicKeysGetter, implicitAuds authenticator.Audiences, getter Getter, opts []Option) (*Authenticator, error) {
	if len(issuers) == 0 {
		return nil, errors.New("new service account authenticator: at least one issuer is required")
	}
	if keys == nil || getter == nil {
		return nil, errors.New("new service account authenticator: keys and getter are required")
	}
	a := &Authenticator{
		issuers:      make(map[string]bool, len(issuers)),
		keys:         keys,
		implicitAuds: implicitAuds,
		clock:        clock.RealClock{},
	}
	for _, iss := range issuers {
		a.issuers[iss] = true
	}
	for _, o := range opts {
		o(a)
	}
	return a, nil
}

// AuthenticateToken implements authenticator.Authenticator. A token that is
// not a JWT or not of one of the issuers is no opinion; a JWT of one of the
// issuers that fails any check is an error.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	if strings.HasPrefix(strings.TrimSpace(token), "{") {
		return nil, false, nil
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, false, nil
	}
	var claims Claims
	if !decodeSegment(parts[1], &claims) || !a.issuers[claims.Issuer] {
		return nil, false, nil
	}
	var header jwtHeader
	if !decodeSegment(parts[0], &header) {
		return nil, false, nil
	}
	method, ok := allowedAlgs[header.Alg]
	if !ok {
		return nil, false, nil
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, false, nil
	}

	keys := a.keys.PublicKeys(header.Kid)
	if len(keys) == 0 {
		return nil, false, errors.New("invalid signature, no keys found")
	}
	signed := token[:len(parts[0])+1+len(parts[1])]
	verified := false
	var errs []error
	for _, k := range keys {
		if err := method.Verify(signed, sig, k.Key); err != nil {
			errs = append(errs, errSignature)
			continue
		}
		verified = true
		break
	}
	if !verified {
		return nil, false, utilerrors.NewAggregate(errs)
	}

	tokenAuds := authenticator.Audiences(claims.Audience)
	if len(tokenAuds) == 0 {
		// Legacy tokens carry no audience: they are for the server itself.
		tokenAuds = a.implicitAuds
	}
	requested, ok := authenticator.AudiencesFrom(ctx)
	if !ok {
		requested = a.implicitAuds
	}
	auds := tokenAuds.Intersect(requested)
	if len(auds) == 0 && len(a.implicitAuds) != 0 {
		return nil, false, fmt.Errorf("token audiences %q is invalid for the target audiences %q", tokenAuds, requested)
	}

	sa, err := a.validate(ctx, token, &claims)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: sa.user(), Audiences: auds}, true, nil
}

// decodeSegment decodes one base64url JSON segment of a compact JWS.
func decodeSegment(seg string, v any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return false
	}
	return json.Unmarshal(raw, v) == nil
}
