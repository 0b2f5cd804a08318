package launcher

import (
	"fmt"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/pki"
)

// Names of the certificates in the PKI directory (<name>.crt and
// <name>.key); services' argument templates refer to them.
const (
	caCert         = "ca"
	frontProxyCert = "front-proxy-client"
	adminCert      = "admin"
)

// Admin is the user of the admin kubeconfig.
const (
	AdminUser  = "kplane-admin"
	AdminGroup = "system:masters"
)

// certificates are what the installation runs on.
type certificates struct {
	ca, admin *pki.Cert
	dir       pki.Dir
}

// issue makes (or reuses) the CA, a serving certificate per service
// (named after it), the gateway's front-proxy client certificate and the
// admin's client certificate.
func issue(dir string, services []Service) (*certificates, error) {
	d := pki.Dir{Path: dir}
	ca, err := d.CA(caCert, "kplane-ca")
	if err != nil {
		return nil, fmt.Errorf("issue the CA: %w", err)
	}
	for _, s := range services {
		if _, err := d.Serving(ca, s.Name, "kplane-"+s.Name, nil); err != nil {
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
	return &certificates{ca: ca, admin: admin, dir: d}, nil
}
