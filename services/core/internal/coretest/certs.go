package coretest

import (
	"net/http"
	"testing"

	restclient "k8s.io/client-go/rest"

	"kplane.dev/libs/apiserver/frontproxy"
	"kplane.dev/libs/pki"
)

// GatewayName is the CN of the gateway's client certificate, the only
// name the replicas trust identity headers from.
const GatewayName = frontproxy.ClientName

// Admin is the identity tests act as unless they choose another.
var Admin = frontproxy.User{Name: "system:admin", Groups: []string{"system:masters", "system:authenticated"}}

// Certs are the certificates of a test installation, as PEM files.
type Certs struct {
	// CA signs everything below; its file verifies the serving
	// certificate and the gateway's client certificate.
	CA      *pki.Cert
	CAFile  string
	Serving pki.Files
	Gateway *pki.Cert
	// GatewayFiles is the gateway's client certificate.
	GatewayFiles pki.Files
	dir          pki.Dir
}

// NewCerts writes a CA, a serving certificate for the loopback addresses
// and the gateway's client certificate under t.TempDir().
func NewCerts(t testing.TB) *Certs {
	t.Helper()
	d := pki.Dir{Path: t.TempDir()}
	ca, err := d.CA("ca", "kplane-test-ca")
	if err != nil {
		t.Fatalf("make CA: %v", err)
	}
	if _, err := d.Serving(ca, "core", "core", nil); err != nil {
		t.Fatalf("make serving certificate: %v", err)
	}
	gw, err := d.Client(ca, "gateway", GatewayName, nil)
	if err != nil {
		t.Fatalf("make gateway certificate: %v", err)
	}
	return &Certs{CA: ca, CAFile: d.Files("ca").Cert, Serving: d.Files("core"), Gateway: gw, GatewayFiles: d.Files("gateway"), dir: d}
}

// Client issues a client certificate of the test CA for user, named name
// in the certificate directory: a certificate that is not the gateway's.
func (c *Certs) Client(t testing.TB, name, user string) *pki.Cert {
	t.Helper()
	cert, err := c.dir.Client(c.CA, name, user, nil)
	if err != nil {
		t.Fatalf("make client certificate: %v", err)
	}
	return cert
}

// Config is a client-go config of host (https://...) that trusts the test
// CA, presents cert (none when nil) and sends u's identity in the front
// proxy headers.
func (c *Certs) Config(t testing.TB, host string, cert *pki.Cert, u frontproxy.User) *restclient.Config {
	t.Helper()
	cfg := &restclient.Config{
		Host:            host,
		TLSClientConfig: restclient.TLSClientConfig{CAData: c.CA.CertPEM()},
		QPS:             -1,
		WrapTransport:   identity(u),
	}
	if cert != nil {
		key, err := cert.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		cfg.CertData, cfg.KeyData = cert.CertPEM(), key
	}
	return cfg
}

// identity sets u's front proxy headers on every request, as the gateway
// does after authenticating a caller.
func identity(u frontproxy.User) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set(frontproxy.UserHeader, u.Name)
			if u.UID != "" {
				r.Header.Set(frontproxy.UIDHeader, u.UID)
			}
			for _, g := range u.Groups {
				r.Header.Add(frontproxy.GroupHeader, g)
			}
			for k, vs := range u.Extra {
				for _, v := range vs {
					r.Header.Add(frontproxy.ExtraHeaderPrefix+k, v)
				}
			}
			return rt.RoundTrip(r)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
