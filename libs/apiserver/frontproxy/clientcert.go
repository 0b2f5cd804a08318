package frontproxy

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
)

// ErrNoClientCertificate is VerifyClient's answer to a request that
// presented no client certificate.
var ErrNoClientCertificate = errors.New("no client certificate")

// VerifyClient verifies the client certificate r presented against roots
// for client authentication, with the rest of the chain it sent as
// intermediates, and returns its leaf. TLS servers here ask for client
// certificates without verifying them (several CAs are accepted for
// different purposes), so every handler that trusts one verifies it here.
// A handler that serves many requests builds a Verifier instead.
func VerifyClient(r *http.Request, roots *x509.CertPool) (*x509.Certificate, error) {
	certs, err := peerCertificates(r, roots)
	if err != nil {
		return nil, err
	}
	if _, err := verifyChain(certs, roots, time.Now()); err != nil {
		return nil, err
	}
	return certs[0], nil
}

func peerCertificates(r *http.Request, roots *x509.CertPool) ([]*x509.Certificate, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, ErrNoClientCertificate
	}
	if roots == nil {
		return nil, errors.New("verify client certificate: no CA configured")
	}
	return r.TLS.PeerCertificates, nil
}

func verifyChain(certs []*x509.Certificate, roots *x509.CertPool, now time.Time) ([][]*x509.Certificate, error) {
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	chains, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		CurrentTime:   now,
	})
	if err != nil {
		return nil, fmt.Errorf("verify client certificate %q: %w", certs[0].Subject.CommonName, err)
	}
	return chains, nil
}

// verifiedSize bounds the certificates a Verifier remembers: far more than
// the connections of its callers, and when full it starts over, which
// costs one verification per connection.
const verifiedSize = 1024

// Verifier is VerifyClient for one CA, remembering what it verified.
// Verifying a chain checks a signature per certificate, and a client
// sends the same certificate with every request of a connection: the
// gateway to core over a few long-lived HTTP/2 connections, kubectl to
// the gateway. A verified leaf is known by its parsed certificate, which
// belongs to the TLS connection that proved its key, and is trusted again
// until the first certificate of its chain expires.
type Verifier struct {
	roots *x509.CertPool
	now   func() time.Time

	mu       sync.Mutex
	verified map[*x509.Certificate]time.Time
}

// NewVerifier verifies against roots; nil roots refuse every certificate.
func NewVerifier(roots *x509.CertPool) *Verifier {
	return &Verifier{roots: roots, now: time.Now, verified: map[*x509.Certificate]time.Time{}}
}

// Verify is VerifyClient against the Verifier's roots.
func (v *Verifier) Verify(r *http.Request) (*x509.Certificate, error) {
	certs, err := peerCertificates(r, v.roots)
	if err != nil {
		return nil, err
	}
	leaf, now := certs[0], v.now()
	v.mu.Lock()
	until, ok := v.verified[leaf]
	v.mu.Unlock()
	if ok && now.Before(until) {
		return leaf, nil
	}
	chains, err := verifyChain(certs, v.roots, now)
	if err != nil {
		return nil, err
	}
	until = leaf.NotAfter
	for _, c := range chains[0] {
		if c.NotAfter.Before(until) {
			until = c.NotAfter
		}
	}
	v.mu.Lock()
	if len(v.verified) >= verifiedSize {
		clear(v.verified)
	}
	v.verified[leaf] = until
	v.mu.Unlock()
	return leaf, nil
}

// CheckAllowedName refuses cert unless its CN is one of allowed. An empty
// allowed list refuses every certificate: which front proxies may name
// users is always said, never implied by the CA alone.
func CheckAllowedName(cert *x509.Certificate, allowed []string) error {
	if !slices.Contains(allowed, cert.Subject.CommonName) {
		return fmt.Errorf("client certificate CN %q is not an allowed front proxy name", cert.Subject.CommonName)
	}
	return nil
}

// RequireClientCertificate serves next to a client whose certificate
// clientCA verifies, and kube's 401 Unauthorized to any other: the rule
// of the internal services' endpoints that name no user, such as metrics
// and profiles. A nil clientCA refuses everyone.
func RequireClientCertificate(next http.Handler, clientCA *x509.CertPool, log *slog.Logger) http.Handler {
	v := NewVerifier(clientCA)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := v.Verify(r); err != nil {
			log.Debug("client certificate refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewUnauthorized("Unauthorized")); werr != nil {
				log.Debug("write refusal", "err", werr)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}
