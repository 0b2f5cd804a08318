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

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
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

	// mu guards verifier, made on the first token (the issuer may start
	// after authn) from the issuer's discovery document.
	mu       sync.Mutex
	verifier *gooidc.IDTokenVerifier
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
	verifier, err := a.verifierFor(ctx)
	if err != nil {
		return nil, false, err
	}
	token2, err := verifier.Verify(ctx, token)
	if err != nil {
		return nil, false, fmt.Errorf("oidc: verify token: %w", err)
	}
	claims := jwt.MapClaims{}
	if err := token2.Claims(&claims); err != nil {
		return nil, false, fmt.Errorf("oidc: read claims: %w", err)
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

// verifierFor returns the token verifier, discovering the issuer on first
// use; a failed discovery is tried again on the next token.
func (a *Authenticator) verifierFor(ctx context.Context) (*gooidc.IDTokenVerifier, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.verifier != nil {
		return a.verifier, nil
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	provider, err := gooidc.NewProvider(gooidc.ClientContext(ctx, a.client), a.issuer)
	if err != nil {
		return nil, fmt.Errorf("oidc: discover issuer: %w", err)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&doc); err != nil || doc.JWKSURI == "" {
		return nil, fmt.Errorf("oidc: discovery document has no jwks_uri (%v)", err)
	}
	keys := &keySet{uri: doc.JWKSURI, client: a.client, clock: a.clock, interval: a.refreshInterval, algs: a.algs}
	a.verifier = gooidc.NewVerifier(a.issuer, keys, &gooidc.Config{
		ClientID: a.clientID, SupportedSigningAlgs: a.algs, Now: a.clock.Now,
	})
	return a.verifier, nil
}

// keySet holds the issuer's signing keys and fetches them again for a key
// id it does not know, at most once per interval, so that a stream of
// forged key ids cannot turn authn into a load generator against the
// issuer (go-oidc's RemoteKeySet fetches on every unknown one).
type keySet struct {
	uri      string
	client   *http.Client
	clock    clock.PassiveClock
	interval time.Duration
	algs     []string

	// mu guards keys and lastFetch; fetches happen under it, so
	// concurrent misses cause one fetch.
	mu        sync.Mutex
	keys      []jose.JSONWebKey
	lastFetch time.Time
}

var _ gooidc.KeySet = (*keySet)(nil)

// VerifySignature implements gooidc.KeySet.
func (k *keySet) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	algs := make([]jose.SignatureAlgorithm, len(k.algs))
	for i, alg := range k.algs {
		algs[i] = jose.SignatureAlgorithm(alg)
	}
	jws, err := jose.ParseSigned(token, algs)
	if err != nil {
		return nil, fmt.Errorf("malformed jwt: %w", err)
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := k.keysFor(ctx, kid)
	if err != nil {
		return nil, err
	}
	for _, key := range keys {
		if payload, err := jws.Verify(&key); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("failed to verify id token signature")
}

// keysFor returns the keys that may verify a token with kid, fetching the
// set when kid is unknown and the last fetch is older than the interval.
func (k *keySet) keysFor(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if keys := k.lookup(kid); len(keys) > 0 {
		return keys, nil
	}
	now := k.clock.Now()
	if !k.lastFetch.IsZero() && now.Sub(k.lastFetch) < k.interval {
		return nil, fmt.Errorf("no key with id %q in the issuer's key set", kid)
	}
	k.lastFetch = now
	if err := k.fetch(ctx); err != nil {
		return nil, err
	}
	if keys := k.lookup(kid); len(keys) > 0 {
		return keys, nil
	}
	return nil, fmt.Errorf("no key with id %q in the issuer's key set", kid)
}

// lookup returns the keys of id kid and those without an id; with mu held.
func (k *keySet) lookup(kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, key := range k.keys {
		if kid == "" || key.KeyID == "" || key.KeyID == kid {
			out = append(out, key)
		}
	}
	return out
}

// fetch reads the key set; with mu held. A key go-jose cannot read, or
// one not for signatures, is left out rather than failing the others.
func (k *keySet) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, k.uri, nil)
	if err != nil {
		return fmt.Errorf("oidc: fetch keys: %w", err)
	}
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("oidc: fetch keys: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDocumentBytes))
	if err != nil {
		return fmt.Errorf("oidc: fetch keys: read %s: %w", k.uri, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("oidc: fetch keys: get %s: %s", k.uri, resp.Status)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return fmt.Errorf("oidc: fetch keys: decode %s: %w", k.uri, err)
	}
	keys := make([]jose.JSONWebKey, 0, len(set.Keys))
	for _, raw := range set.Keys {
		var key jose.JSONWebKey
		if err := key.UnmarshalJSON(raw); err != nil || (key.Use != "" && key.Use != "sig") || !key.IsPublic() {
			continue
		}
		keys = append(keys, key)
	}
	k.keys = keys
	return nil
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
