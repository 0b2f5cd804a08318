package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"slices"
	"time"
)

// Lifetimes of what this package issues.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 365 * 24 * time.Hour
	// backdate covers clocks a little behind the issuer's.
	backdate = time.Hour
)

// Cert is a certificate and its private key.
type Cert struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// CertPEM is the certificate in PEM form.
func (c *Cert) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Cert.Raw})
}

// KeyPEM is the private key in PEM form (PKCS #8).
func (c *Cert) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// TLSCertificate is c for a tls.Config.
func (c *Cert) TLSCertificate() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.Cert.Raw}, PrivateKey: c.Key, Leaf: c.Cert}
}

// Pool is a pool holding only c, to trust it as a CA.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// NewCA makes a self-signed certificate authority named commonName, valid
// from now.
func NewCA(commonName string, now time.Time) (*Cert, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return issue(tmpl, nil, now, CAValidity)
}

// Serving issues a serving certificate for 127.0.0.1, ::1, localhost and
// hosts (DNS names or IP addresses).
func (ca *Cert) Serving(commonName string, hosts []string, now time.Time) (*Cert, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range servingHosts(hosts) {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return issue(tmpl, ca, now, LeafValidity)
}

// Client issues a client certificate for user in groups, which Kubernetes
// reads from the subject's CN and O.
func (ca *Cert) Client(user string, groups []string, now time.Time) (*Cert, error) {
	if user == "" {
		return nil, errors.New("issue client certificate: a user is required")
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: slices.Clone(groups)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return issue(tmpl, ca, now, LeafValidity)
}

// servingHosts are the names every serving certificate holds, then hosts,
// without repeats.
func servingHosts(hosts []string) []string {
	all := []string{"127.0.0.1", "::1", "localhost"}
	for _, h := range hosts {
		if h != "" && !slices.Contains(all, h) {
			all = append(all, h)
		}
	}
	return all
}

// issue signs tmpl with parent's key, or with its own when parent is nil.
func issue(tmpl *x509.Certificate, parent *Cert, now time.Time, validity time.Duration) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key for %q: %w", tmpl.Subject.CommonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-backdate)
	tmpl.NotAfter = now.Add(validity)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.Key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("sign certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return &Cert{Cert: cert, Key: key}, nil
}

// LoadPool reads a PEM CA bundle into a pool, for flags such as
// --client-ca-file.
func LoadPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
