package frontproxy

import (
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

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
func VerifyClient(r *http.Request, roots *x509.CertPool) (*x509.Certificate, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, ErrNoClientCertificate
	}
	if roots == nil {
		return nil, errors.New("verify client certificate: no CA configured")
	}
	certs := r.TLS.PeerCertificates
	intermediates := x509.NewCertPool()
	for _, c := range certs[1:] {
		intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: intermediates,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, fmt.Errorf("verify client certificate %q: %w", certs[0].Subject.CommonName, err)
	}
	return certs[0], nil
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := VerifyClient(r, clientCA); err != nil {
			log.Debug("client certificate refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
			if werr := apistatus.WriteHTTP(w, apierrors.NewUnauthorized("Unauthorized")); werr != nil {
				log.Debug("write refusal", "err", werr)
			}
			return
		}
		next.ServeHTTP(w, r)
	})
}
