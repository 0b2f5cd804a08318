package frontproxy

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"kplane.dev/libs/pki"
)

func requestWith(certs ...*pki.Cert) *http.Request {
	r := &http.Request{TLS: &tls.ConnectionState{}}
	for _, c := range certs {
		r.TLS.PeerCertificates = append(r.TLS.PeerCertificates, c.Cert)
	}
	return r
}

// TestVerifierRemembers: a verified certificate is trusted again until
// it expires, and then refused; a certificate of another CA is refused
// every time; no certificate is ErrNoClientCertificate.
func TestVerifierRemembers(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Client("gateway", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Client("gateway", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(ca.Pool())
	clock := now
	v.now = func() time.Time { return clock }
	for i := range 2 {
		if got, err := v.Verify(requestWith(leaf)); err != nil || got != leaf.Cert {
			t.Fatalf("verification %d: %v, %v", i, got, err)
		}
		if _, err := v.Verify(requestWith(stranger)); err == nil {
			t.Fatalf("verification %d: another CA's certificate passed", i)
		}
	}
	if len(v.verified) != 1 {
		t.Errorf("remembers %d certificates, want the one verified", len(v.verified))
	}
	clock = leaf.Cert.NotAfter.Add(time.Second)
	if _, err := v.Verify(requestWith(leaf)); err == nil {
		t.Error("an expired certificate passed because it was verified before")
	}
	if _, err := v.Verify(&http.Request{}); err != ErrNoClientCertificate {
		t.Errorf("no certificate: %v", err)
	}
	if _, err := NewVerifier(nil).Verify(requestWith(leaf)); err == nil {
		t.Error("a Verifier without roots passed a certificate")
	}
}

// TestVerifierStartsOver: when full, the Verifier forgets what it knew
// and verifies again, without refusing anyone.
func TestVerifierStartsOver(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Client("gateway", nil, now)
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier(ca.Pool())
	for range verifiedSize {
		v.verified[&x509.Certificate{}] = now.Add(time.Hour)
	}
	if _, err := v.Verify(requestWith(leaf)); err != nil {
		t.Fatal(err)
	}
	if len(v.verified) != 1 {
		t.Errorf("remembers %d certificates after starting over, want 1", len(v.verified))
	}
}

// BenchmarkVerify is the cost of authenticating one request of a
// connection whose client certificate was verified before, against
// verifying it every time.
func BenchmarkVerify(b *testing.B) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		b.Fatal(err)
	}
	leaf, err := ca.Client("gateway", nil, now)
	if err != nil {
		b.Fatal(err)
	}
	r := requestWith(leaf)
	b.Run("every time", func(b *testing.B) {
		for b.Loop() {
			if _, err := VerifyClient(r, ca.Pool()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("remembered", func(b *testing.B) {
		v := NewVerifier(ca.Pool())
		for b.Loop() {
			if _, err := v.Verify(r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
