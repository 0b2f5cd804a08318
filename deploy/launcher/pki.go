package launcher

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/pki"
)

// Names of the certificates in the PKI directory (<name>.crt and
// <name>.key); services' argument templates refer to them.
const (
	caCert         = "ca"
	frontProxyCert = "front-proxy-client"
	adminCert      = "admin"
	// serviceAccountKey is the service account token signing key
	// (<name>.key, PKCS#8) and its public half (<name>.pub).
	serviceAccountKey = "sa"
)

// Admin is the user of the admin kubeconfig.
const (
	AdminUser  = "kplane-admin"
	AdminGroup = "system:masters"
)

// certificates are what the installation runs on.
type certificates struct {
	ca, admin *pki.Cert
	// clients are the client certificates of services that call the API,
	// by service name.
	clients map[string]*pki.Cert
	dir     pki.Dir
}

// issue makes (or reuses) the CA, a serving certificate per service
// (named after it, valid for the loopback names and for hosts(name)),
// the gateway's front-proxy client certificate and the admin's client
// certificate. A certificate whose names no longer cover what hosts asks
// is issued anew.
func issue(dir string, services []Service, hosts func(service string) []string) (*certificates, error) {
	d := pki.Dir{Path: dir}
	ca, err := d.CA(caCert, "kplane-ca")
	if err != nil {
		return nil, fmt.Errorf("issue the CA: %w", err)
	}
	for _, s := range services {
		var h []string
		if hosts != nil {
			h = hosts(s.Name)
		}
		if _, err := d.Serving(ca, s.Name, "kplane-"+s.Name, h); err != nil {
			return nil, fmt.Errorf("issue the serving certificate of %s: %w", s.Name, err)
		}
	}
	if _, err := d.Client(ca, frontProxyCert, frontproxy.ClientName, nil); err != nil {
		return nil, fmt.Errorf("issue the front proxy client certificate: %w", err)
	}
	admin, err := d.Client(ca, adminCert, AdminUser, []string{AdminGroup})
	if err != nil {
		return nil, fmt.Errorf("issue the admin client certificate: %w", err)
	}
	clients := map[string]*pki.Cert{}
	for _, s := range services {
		if s.Identity == nil {
			continue
		}
		c, err := d.Client(ca, s.Name+"-client", s.Identity.User, s.Identity.Groups)
		if err != nil {
			return nil, fmt.Errorf("issue the client certificate of %s: %w", s.Name, err)
		}
		clients[s.Name] = c
	}
	if err := signingKey(dir, serviceAccountKey); err != nil {
		return nil, err
	}
	return &certificates{ca: ca, admin: admin, clients: clients, dir: d}, nil
}

// signingKey makes the RSA key pair <name>.key and <name>.pub in dir
// unless the private key exists: tokens signed before a restart stay
// valid. RSA because RS256 is what every JWT verifier accepts.
func signingKey(dir, name string) error {
	keyPath, pubPath := filepath.Join(dir, name+".key"), filepath.Join(dir, name+".pub")
	if _, err := os.Stat(keyPath); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read the signing key: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generate the signing key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("encode the signing key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("encode the verification key: %w", err)
	}
	// The public half first: a key without it is regenerated whole.
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644); err != nil {
		return fmt.Errorf("write the verification key: %w", err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("write the signing key: %w", err)
	}
	return nil
}
