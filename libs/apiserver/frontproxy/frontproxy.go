package frontproxy

import (
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// ClientName is the CN of the gateway's client certificate, the name
// storage services accept identity headers from by default (kube's
// conventional front proxy name).
const ClientName = "front-proxy-client"

// Options configure an Authenticator.
type Options struct {
	// ClientCA verifies the front proxy's client certificate.
	ClientCA *x509.CertPool
	// AllowedNames are the CNs a front proxy certificate may carry; at
	// least one is required.
	AllowedNames []string
	// Logger receives why requests are refused, at debug level; nil
	// discards.
	Logger *slog.Logger
}

// Authenticator reads the identity of requests that come through the front
// proxy.
type Authenticator struct {
	ca      *Verifier
	allowed []string
	headers Headers
	log     *slog.Logger
}

// ErrNoAllowedNames refuses a front proxy configuration that would take
// identity headers from any certificate its CA signed.
var ErrNoAllowedNames = errors.New("front proxy authenticator: at least one allowed client certificate name is required; without one any certificate of the client CA could name any user")

// New returns the Authenticator o describes.
func New(o Options) (*Authenticator, error) {
	if o.ClientCA == nil {
		return nil, errors.New("front proxy authenticator: a client CA is required")
	}
	if !slices.ContainsFunc(o.AllowedNames, func(n string) bool { return strings.TrimSpace(n) != "" }) {
		return nil, ErrNoAllowedNames
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authenticator{ca: NewVerifier(o.ClientCA), allowed: slices.Clone(o.AllowedNames), headers: DefaultHeaders(), log: log}, nil
}

// Wrap returns next behind the authenticator: next sees only requests from
// the front proxy, with their user in the context (UserFrom) and without
// the identity headers.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.authenticate(r)
		StripClientIdentity(r.Header)
		if err != nil {
			a.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewUnauthorized("Unauthorized")); werr != nil {
				a.log.Debug("write refusal", "err", werr)
			}
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
	})
}

func (a *Authenticator) authenticate(r *http.Request) (*User, error) {
	cert, err := a.ca.Verify(r)
	if err != nil {
		return nil, err
	}
	if err := CheckAllowedName(cert, a.allowed); err != nil {
		return nil, err
	}
	u := a.headers.Read(r.Header)
	if u == nil {
		return nil, errors.New("no " + UserHeader + " header")
	}
	return u, nil
}
