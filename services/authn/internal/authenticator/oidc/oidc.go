package oidc

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"k8s.io/utils/clock"

	"kplane.dev/services/authn/internal/authenticator"
)

// Defaults of the claim mapping and of the key set's refresh.
const (
	DefaultUsernameClaim = "sub"
	// DefaultRefreshInterval bounds how often an unknown key id makes the
	// key set be fetched again, so a stream of forged kids cannot turn
	// authn into a load generator against the issuer.
	DefaultRefreshInterval = 10 * time.Second
	fetchTimeout           = 10 * time.Second
	maxDocumentBytes       = 1 << 20
)

// Options are kube-apiserver's --oidc-* flags.
type Options struct {
	// IssuerURL is the https URL of the issuer; a token's iss must be it.
	IssuerURL string
	// ClientID must be one of a token's audiences.
	ClientID string
	// CA verifies the issuer's serving certificate; nil is the system pool.
	CA *x509.CertPool
	// UsernameClaim names the claim that is the user name; empty is sub.
	UsernameClaim string
	// UsernamePrefix goes before every user name. Empty means "<issuer>#"
	// unless the claim is email; "-" means no prefix (kube's defaulting).
	UsernamePrefix string
	// GroupsClaim names a string or string array claim of groups; empty
	// means no groups.
	GroupsClaim  string
	GroupsPrefix string
	// RequiredClaims must each be present with the given string value.
	RequiredClaims map[string]string
	// SigningAlgs are the accepted signature algorithms; empty is RS256.
	SigningAlgs []string
}

// Authenticator authenticates ID tokens of one issuer.
type Authenticator struct {
	issuer         string
	clientID       string
	usernameClaim  string
	usernamePrefix string
	groupsClaim    string
	groupsPrefix   string
	required       map[string]string
	algs           []string

	client          *http.Client
	clock           clock.PassiveClock
	refreshInterval time.Duration

	// mu guards the key set and when it was last fetched; fetches happen
	// under it, so concurrent misses cause one fetch.
	mu        sync.Mutex
	jwksURI   string
	keys      map[string]crypto.PublicKey
	unnamed   []crypto.PublicKey // keys without a kid
	lastFetch time.Time
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// Option configures an Authenticator.
type Option func(*Authenticator)

// WithClock sets the clock that expiry and the refresh interval use.
func WithClock(c clock.PassiveClock) Option { return func(a *Authenticator) { a.clock = c } }

// WithRefreshInterval sets how often, at most, the key set is fetched again
// for an unknown key id.
func WithRefreshInterval(d time.Duration) Option {
	return func(a *Authenticator) { a.refreshInterval = d }
}

// New returns an authenticator for o. Nothing is fetched yet: the issuer
// may start after authn, so discovery happens on the first token.
func New(o Options, opts ...Option) (*Authenticator, error) {
	if !strings.HasPrefix(o.IssuerURL, "https://") {
		return nil, fmt.Errorf("oidc: issuer URL %q must use https", o.IssuerURL)
	}
	if o.ClientID == "" {
		return nil, errors.New("oidc: client id is required")
	}
	a := &Authenticator{
		issuer:          o.IssuerURL,
		clientID:        o.ClientID,
		usernameClaim:   o.UsernameClaim,
		groupsClaim:     o.GroupsClaim,
		groupsPrefix:    o.GroupsPrefix,
		required:        o.RequiredClaims,
		algs:            o.SigningAlgs,
		clock:           clock.RealClock{},
		refreshInterval: DefaultRefreshInterval,
	}
	if a.usernameClaim == "" {
		a.usernameClaim = DefaultUsernameClaim
	}
	a.usernamePrefix = UsernamePrefix(o.IssuerURL, a.usernameClaim, o.UsernamePrefix)
	if len(a.algs) == 0 {
		a.algs = []string{jwt.SigningMethodRS256.Alg()}
	}
	for _, alg := range a.algs {
		if jwt.GetSigningMethod(alg) == nil || alg == "none" || strings.HasPrefix(alg, "HS") {
			return nil, fmt.Errorf("oidc: unsupported signing algorithm %q", alg)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: o.CA, MinVersion: tls.VersionTLS12}
	a.client = &http.Client{Transport: tr, Timeout: fetchTimeout}
	for _, opt := range opts {
		opt(a)
	}
	return a, nil
}

// UsernamePrefix is kube's defaulting of --oidc-username-prefix: unset
// means "<issuer>#" for any claim but email, so that names of one issuer
// cannot collide with another's; "-" means none.
func UsernamePrefix(issuer, claim, prefix string) string {
	switch {
	case prefix == "-":
		return ""
	case prefix == "" && claim != "email":
		return issuer + "#"
	default:
		return prefix
	}
}

// AuthenticateToken implements authenticator.Authenticator. A token that
// is not a JWT of this issuer is no opinion.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	var unverified jwt.RegisteredClaims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &unverified); err != nil || unverified.Issuer != a.issuer {
		return nil, false, nil
	}
	claims := jwt.MapClaims{}
	_, err := jwt.NewParser(
		jwt.WithValidMethods(a.algs),
		jwt.WithAudience(a.clientID),
		jwt.WithIssuer(a.issuer),
		jwt.WithExpirationRequired(),
		jwt.WithTimeFunc(a.clock.Now),
	).ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return a.keysFor(ctx, kid)
	})
	if err != nil {
		return nil, false, fmt.Errorf("oidc: verify token: %w", err)
	}
	user, err := a.user(claims)
	if err != nil {
		return nil, false, err
	}
	return &authenticator.Response{User: *user}, true, nil
}

// user maps verified claims to a user as kube does.
func (a *Authenticator) user(claims jwt.MapClaims) (*authenticator.UserInfo, error) {
	name, ok := claims[a.usernameClaim].(string)
	if !ok {
		return nil, fmt.Errorf("oidc: parse username claims %q: claim not present or not a string", a.usernameClaim)
	}
	if a.usernameClaim == "email" {
		// An absent email_verified counts as verified, as in kube.
		if v, present := claims["email_verified"]; present {
			verified, isBool := v.(bool)
			if !isBool {
				return nil, fmt.Errorf("oidc: parse 'email_verified' claim: got %T, want bool", v)
			}
			if !verified {
				return nil, errors.New("oidc: email not verified")
			}
		}
	}
	u := &authenticator.UserInfo{Name: a.usernamePrefix + name}
	if a.groupsClaim != "" {
		if v, present := claims[a.groupsClaim]; present {
			groups, err := stringOrArray(v)
			if err != nil {
				return nil, fmt.Errorf("oidc: parse groups claim %q: %w", a.groupsClaim, err)
			}
			for _, g := range groups {
				u.Groups = append(u.Groups, a.groupsPrefix+g)
			}
		}
	}
	for k, want := range a.required {
		v, present := claims[k]
		if !present {
			return nil, fmt.Errorf("oidc: required claim %s not found in ID Token", k)
		}
		got, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("oidc: parse claim %s: got %T, want string", k, v)
		}
		if got != want {
			return nil, fmt.Errorf("oidc: required claim %s value does not match. Got = %s, want = %s", k, got, want)
		}
	}
	return u, nil
}

func stringOrArray(v any) ([]string, error) {
	switch v := v.(type) {
	case string:
		return []string{v}, nil
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("got an element of type %T, want string", e)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("got %T, want a string or an array of strings", v)
	}
}

// keysFor returns the keys that may verify a token with kid, fetching the
// key set when kid is unknown and the last fetch is older than the refresh
// interval.
func (a *Authenticator) keysFor(ctx context.Context, kid string) (any, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if set, ok := a.lookup(kid); ok {
		return set, nil
	}
	now := a.clock.Now()
	if !a.lastFetch.IsZero() && now.Sub(a.lastFetch) < a.refreshInterval {
		return nil, fmt.Errorf("no key with id %q in the issuer's key set", kid)
	}
	a.lastFetch = now
	if err := a.fetch(ctx); err != nil {
		return nil, err
	}
	if set, ok := a.lookup(kid); ok {
		return set, nil
	}
	return nil, fmt.Errorf("no key with id %q in the issuer's key set", kid)
}

// lookup is called with mu held.
func (a *Authenticator) lookup(kid string) (jwt.VerificationKeySet, bool) {
	var set jwt.VerificationKeySet
	if kid != "" {
		if k, ok := a.keys[kid]; ok {
			set.Keys = append(set.Keys, k)
		}
	} else {
		for _, k := range a.keys {
			set.Keys = append(set.Keys, k)
		}
	}
	for _, k := range a.unnamed {
		set.Keys = append(set.Keys, k)
	}
	return set, len(set.Keys) > 0
}

// fetch reads discovery (once) and the key set; called with mu held.
func (a *Authenticator) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	if a.jwksURI == "" {
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if err := a.get(ctx, strings.TrimSuffix(a.issuer, "/")+"/.well-known/openid-configuration", &doc); err != nil {
			return fmt.Errorf("oidc: discover issuer: %w", err)
		}
		if doc.Issuer != a.issuer {
			return fmt.Errorf("oidc: issuer did not match the issuer returned by provider, expected %q got %q", a.issuer, doc.Issuer)
		}
		if doc.JWKSURI == "" {
			return errors.New("oidc: discovery document has no jwks_uri")
		}
		a.jwksURI = doc.JWKSURI
	}
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := a.get(ctx, a.jwksURI, &set); err != nil {
		return fmt.Errorf("oidc: fetch keys: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	var unnamed []crypto.PublicKey
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		pub, err := k.publicKey()
		if err != nil {
			// One key the issuer adds in a form kube would not use
			// either must not hide the others.
			continue
		}
		if k.Kid == "" {
			unnamed = append(unnamed, pub)
			continue
		}
		keys[k.Kid] = pub
	}
	a.keys, a.unnamed = keys, unnamed
	return nil
}

func (a *Authenticator) get(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return fmt.Errorf("read %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", url, err)
	}
	return nil
}

// jwk is a JSON Web Key of the kinds OIDC issuers publish (RFC 7517/7518).
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

func (k jwk) publicKey() (crypto.PublicKey, error) {
	num := func(s string) (*big.Int, error) {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(b) == 0 {
			return nil, errors.New("bad base64url number")
		}
		return new(big.Int).SetBytes(b), nil
	}
	switch k.Kty {
	case "RSA":
		n, err := num(k.N)
		if err != nil {
			return nil, err
		}
		e, err := num(k.E)
		if err != nil || !e.IsInt64() {
			return nil, errors.New("bad RSA exponent")
		}
		return &rsa.PublicKey{N: n, E: int(e.Int64())}, nil
	case "EC":
		curves := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}
		curve, ok := curves[k.Crv]
		if !ok {
			return nil, fmt.Errorf("unsupported curve %q", k.Crv)
		}
		x, err := num(k.X)
		if err != nil {
			return nil, err
		}
		y, err := num(k.Y)
		if err != nil {
			return nil, err
		}
		size := (curve.Params().BitSize + 7) / 8
		raw := make([]byte, 1+2*size)
		raw[0] = 4
		x.FillBytes(raw[1 : 1+size])
		y.FillBytes(raw[1+size:])
		pub, err := ecdsa.ParseUncompressedPublicKey(curve, raw)
		if err != nil {
			return nil, err
		}
		return pub, nil
	default:
		return nil, fmt.Errorf("unsupported key type %q", k.Kty)
	}
}

// JWK is the JSON Web Key of pub with key id kid, for issuers' key sets
// (kplane's own and the test issuer's).
func JWK(kid string, pub crypto.PublicKey) (map[string]string, error) {
	enc := base64.RawURLEncoding.EncodeToString
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
			"n": enc(k.N.Bytes()), "e": enc(big.NewInt(int64(k.E)).Bytes())}, nil
	case *ecdsa.PublicKey:
		crv := map[elliptic.Curve]string{elliptic.P256(): "P-256", elliptic.P384(): "P-384", elliptic.P521(): "P-521"}[k.Curve]
		alg := map[string]string{"P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}[crv]
		if crv == "" {
			return nil, errors.New("jwk: unsupported curve")
		}
		raw, err := k.Bytes()
		if err != nil {
			return nil, fmt.Errorf("jwk: %w", err)
		}
		size := (len(raw) - 1) / 2
		return map[string]string{"kty": "EC", "kid": kid, "use": "sig", "alg": alg, "crv": crv,
			"x": enc(raw[1 : 1+size]), "y": enc(raw[1+size:])}, nil
	default:
		return nil, fmt.Errorf("jwk: unsupported key type %T", pub)
	}
}
