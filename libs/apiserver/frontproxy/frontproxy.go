package frontproxy

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// The identity headers the gateway sets, as kube's front proxy names them.
const (
	UserHeader        = "X-Remote-User"
	UIDHeader         = "X-Remote-Uid"
	GroupHeader       = "X-Remote-Group"
	ExtraHeaderPrefix = "X-Remote-Extra-"
)

// ClientName is the CN of the gateway's client certificate, the name
// storage services accept identity headers from by default (kube's
// conventional front proxy name).
const ClientName = "front-proxy-client"

// Options configure an Authenticator.
type Options struct {
	// ClientCA verifies the front proxy's client certificate.
	ClientCA *x509.CertPool
	// AllowedNames are the CNs a front proxy certificate may carry; empty
	// accepts any client certificate ClientCA verifies, as kube does.
	AllowedNames []string
	// Logger receives why requests are refused, at debug level; nil
	// discards.
	Logger *slog.Logger
}

// Authenticator reads the identity of requests that come through the front
// proxy.
type Authenticator struct {
	ca      *x509.CertPool
	allowed []string
	log     *slog.Logger
}

// New returns the Authenticator o describes.
func New(o Options) (*Authenticator, error) {
	if o.ClientCA == nil {
		return nil, errors.New("front proxy authenticator: a client CA is required")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Authenticator{ca: o.ClientCA, allowed: slices.Clone(o.AllowedNames), log: log}, nil
}

// Wrap returns next behind the authenticator: next sees only requests from
// the front proxy, with their user in the context (UserFrom) and without
// the identity headers.
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := a.authenticate(r)
		stripIdentity(r.Header)
		if err != nil {
			a.log.Debug("request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			unauthorized(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(WithUser(r.Context(), u)))
	})
}

func (a *Authenticator) authenticate(r *http.Request) (*User, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, errors.New("no client certificate")
	}
	certs := r.TLS.PeerCertificates
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         a.ca,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}
	if len(a.allowed) > 0 && !slices.Contains(a.allowed, certs[0].Subject.CommonName) {
		return nil, errors.New("client certificate CN " + certs[0].Subject.CommonName + " is not an allowed front proxy name")
	}
	return identity(r.Header)
}

// identity reads the user from h as kube's requestheader authenticator
// does: the first non-blank user, every non-blank group, and extras keyed
// by the lowercased, percent-decoded rest of the header name.
func identity(h http.Header) (*User, error) {
	u := &User{}
	for _, v := range h.Values(UserHeader) {
		if strings.TrimSpace(v) != "" {
			u.Name = v
			break
		}
	}
	if u.Name == "" {
		return nil, errors.New("no " + UserHeader + " header")
	}
	for _, v := range h.Values(UIDHeader) {
		if strings.TrimSpace(v) != "" {
			u.UID = v
			break
		}
	}
	for _, v := range h.Values(GroupHeader) {
		if strings.TrimSpace(v) != "" {
			u.Groups = append(u.Groups, v)
		}
	}
	for name, values := range h {
		if !isExtra(name) {
			continue
		}
		key, err := url.PathUnescape(strings.ToLower(name[len(ExtraHeaderPrefix):]))
		if err != nil {
			return nil, errors.New("malformed extra header " + name)
		}
		if u.Extra == nil {
			u.Extra = map[string][]string{}
		}
		u.Extra[key] = append(u.Extra[key], values...)
	}
	return u, nil
}

// stripIdentity removes the identity headers, so nothing past the
// authenticator can read an identity it did not vouch for.
func stripIdentity(h http.Header) {
	h.Del(UserHeader)
	h.Del(UIDHeader)
	h.Del(GroupHeader)
	for name := range h {
		if isExtra(name) {
			delete(h, name)
		}
	}
}

// isExtra matches in any case: a header map filled by hand need not hold
// canonical names.
func isExtra(name string) bool {
	return len(name) > len(ExtraHeaderPrefix) && strings.EqualFold(name[:len(ExtraHeaderPrefix)], ExtraHeaderPrefix)
}

// unauthorized writes kube-apiserver's 401 body.
func unauthorized(w http.ResponseWriter) {
	st := apistatus.Status(apierrors.NewUnauthorized("Unauthorized"))
	body, err := json.Marshal(st)
	if err != nil {
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(body)
}
