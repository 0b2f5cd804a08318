package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestServingAndClientCertificatesChainToTheCA(t *testing.T) {
	now := time.Now()
	ca, err := NewCA("kplane-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Serving("core", []string{"core.kplane.svc", "10.0.0.7"}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost", "core.kplane.svc", "10.0.0.7"} {
		t.Run("serving "+host, func(t *testing.T) {
			if _, err := serving.Cert.Verify(x509.VerifyOptions{DNSName: host, Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
				t.Errorf("verify serving certificate for %s: %v", host, err)
			}
		})
	}
	if _, err := serving.Cert.Verify(x509.VerifyOptions{DNSName: "other.example", Roots: ca.Pool()}); err == nil {
		t.Error("serving certificate verified for a name it was not issued for")
	}

	client, err := ca.Client("front-proxy", []string{"system:masters", "ops"}, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify client certificate: %v", err)
	}
	if got := client.Cert.Subject; got.CommonName != "front-proxy" || !sameSet(got.Organization, []string{"system:masters", "ops"}) {
		t.Errorf("client subject = %v, want CN=front-proxy O=[system:masters ops]", got)
	}
	other, err := NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Cert.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err == nil {
		t.Error("client certificate verified against another CA")
	}
	if _, err := ca.Client("", nil, now); err == nil {
		t.Error("issued a client certificate without a user")
	}
}

func TestDirReusesValidFilesAndReplacesOthers(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Now())
	d := Dir{Path: t.TempDir() + "/pki", Clock: clk}
	ca, err := d.CA("ca", "kplane-ca")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := d.Serving(ca, "core", "core", []string{"core.local"})
	if err != nil {
		t.Fatal(err)
	}
	client, err := d.Client(ca, "gateway", "front-proxy", []string{"g", "a"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"ca", "core", "gateway"} {
		f := d.Files(name)
		for path, want := range map[string]os.FileMode{f.Key: 0o600, f.Cert: 0o644} {
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != want {
				t.Errorf("%s mode = %v, want %v", path, st.Mode().Perm(), want)
			}
		}
	}

	same := func(t *testing.T, a, b *Cert) bool {
		t.Helper()
		return a.Cert.SerialNumber.Cmp(b.Cert.SerialNumber) == 0
	}
	t.Run("same request keeps the files", func(t *testing.T) {
		ca2, err := d.CA("ca", "kplane-ca")
		if err != nil {
			t.Fatal(err)
		}
		s2, err := d.Serving(ca2, "core", "core", []string{"core.local"})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := d.Client(ca2, "gateway", "front-proxy", []string{"g", "a"})
		if err != nil {
			t.Fatal(err)
		}
		if !same(t, ca, ca2) || !same(t, serving, s2) || !same(t, client, c2) {
			t.Error("a valid certificate was reissued")
		}
	})
	t.Run("a new host reissues the serving certificate", func(t *testing.T) {
		s2, err := d.Serving(ca, "core", "core", []string{"core.local", "core.remote"})
		if err != nil {
			t.Fatal(err)
		}
		if same(t, serving, s2) || s2.Cert.VerifyHostname("core.remote") != nil {
			t.Error("serving certificate not reissued for a new host")
		}
	})
	t.Run("groups in another order keep the client certificate", func(t *testing.T) {
		c2, err := d.Client(ca, "gateway", "front-proxy", []string{"a", "g"})
		if err != nil {
			t.Fatal(err)
		}
		if !same(t, client, c2) {
			t.Error("client certificate reissued for the same groups")
		}
	})
	t.Run("new groups reissue the client certificate", func(t *testing.T) {
		c2, err := d.Client(ca, "gateway", "front-proxy", []string{"g", "h"})
		if err != nil {
			t.Fatal(err)
		}
		if same(t, client, c2) {
			t.Error("client certificate not reissued for new groups")
		}
	})
	t.Run("a certificate of another CA is reissued", func(t *testing.T) {
		other, err := NewCA("other", clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		c2, err := d.Client(other, "gateway", "front-proxy", []string{"g", "h"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c2.Cert.Verify(x509.VerifyOptions{Roots: other.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("reissued certificate does not chain to the new CA: %v", err)
		}
	})
	t.Run("a corrupt key is replaced", func(t *testing.T) {
		if err := os.WriteFile(d.Files("core").Key, []byte("garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		s2, err := d.Serving(ca, "core", "core", nil)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, err := os.ReadFile(d.Files("core").Key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Parse(s2.CertPEM(), keyPEM); err != nil {
			t.Errorf("replaced files do not parse together: %v", err)
		}
	})
	t.Run("a certificate close to expiry is renewed", func(t *testing.T) {
		clk.SetTime(clk.Now().Add(LeafValidity - RenewBefore + time.Hour))
		ca2, err := d.CA("ca", "kplane-ca")
		if err != nil {
			t.Fatal(err)
		}
		if !same(t, ca, ca2) {
			t.Error("CA reissued while far from expiry")
		}
		c2, err := d.Client(ca2, "gateway", "front-proxy", []string{"g", "h"})
		if err != nil {
			t.Fatal(err)
		}
		if !c2.Cert.NotAfter.After(clk.Now().Add(RenewBefore)) {
			t.Errorf("renewed certificate expires at %v, too soon", c2.Cert.NotAfter)
		}
	})
}

func TestLoadPool(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test-ca", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	good, bad := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "empty.crt")
	if err := os.WriteFile(good, ca.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPool(good); err != nil {
		t.Errorf("load a CA bundle: %v", err)
	}
	if _, err := LoadPool(bad); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("load a file without certificates: %v", err)
	}
}
