package pki

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/utils/clock"
)

// RenewBefore is how long before it expires a certificate in a Dir is
// replaced rather than reused.
const RenewBefore = 30 * 24 * time.Hour

// Dir keeps certificates as PEM files in a directory: <name>.crt (mode
// 0644) and <name>.key (mode 0600). Each method returns what the directory
// holds when it is still what was asked for (same names, signed by the
// same CA, not about to expire), and issues and writes a new one otherwise.
type Dir struct {
	// Path is the directory, created (mode 0700) when missing.
	Path string
	// Clock dates what is issued and judges expiry; nil is the real clock.
	Clock clock.PassiveClock
}

// Files names the two files of a certificate.
type Files struct {
	Cert, Key string
}

// Files are the files of the certificate called name.
func (d Dir) Files(name string) Files {
	return Files{Cert: filepath.Join(d.Path, name+".crt"), Key: filepath.Join(d.Path, name+".key")}
}

func (d Dir) now() time.Time {
	if d.Clock == nil {
		return time.Now()
	}
	return d.Clock.Now()
}

// CA returns the certificate authority called name, named commonName.
func (d Dir) CA(name, commonName string) (*Cert, error) {
	return d.ensure(name, func(c *Cert) bool {
		return c.Cert.IsCA && c.Cert.Subject.CommonName == commonName && bytes.Equal(c.Cert.RawIssuer, c.Cert.RawSubject)
	}, func(now time.Time) (*Cert, error) {
		return NewCA(commonName, now)
	})
}

// Serving returns the serving certificate called name, issued by ca for
// commonName and valid for hosts besides the loopback names.
func (d Dir) Serving(ca *Cert, name, commonName string, hosts []string) (*Cert, error) {
	want := servingHosts(hosts)
	return d.ensure(name, func(c *Cert) bool {
		if c.Cert.Subject.CommonName != commonName || !d.signedBy(c, ca, x509.ExtKeyUsageServerAuth) {
			return false
		}
		for _, h := range want {
			if c.Cert.VerifyHostname(h) != nil {
				return false
			}
		}
		return true
	}, func(now time.Time) (*Cert, error) {
		return ca.Serving(commonName, hosts, now)
	})
}

// Client returns the client certificate called name, issued by ca for
// user in groups.
func (d Dir) Client(ca *Cert, name, user string, groups []string) (*Cert, error) {
	return d.ensure(name, func(c *Cert) bool {
		return c.Cert.Subject.CommonName == user &&
			sameSet(c.Cert.Subject.Organization, groups) &&
			d.signedBy(c, ca, x509.ExtKeyUsageClientAuth)
	}, func(now time.Time) (*Cert, error) {
		return ca.Client(user, groups, now)
	})
}

// sameSet compares groups as sets: DER sorts the values of a subject's
// O, so a certificate does not keep the order they were given in.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func (d Dir) signedBy(c, ca *Cert, usage x509.ExtKeyUsage) bool {
	_, err := c.Cert.Verify(x509.VerifyOptions{
		Roots:       ca.Pool(),
		CurrentTime: d.now(),
		KeyUsages:   []x509.ExtKeyUsage{usage},
	})
	return err == nil
}

// ensure returns the certificate called name when it loads, is fresh and
// keep accepts it; otherwise it issues one and writes it.
func (d Dir) ensure(name string, keep func(*Cert) bool, issue func(time.Time) (*Cert, error)) (*Cert, error) {
	now := d.now()
	existing, err := d.load(name)
	if err != nil {
		return nil, err
	}
	if existing != nil && !now.Before(existing.Cert.NotBefore) && now.Add(RenewBefore).Before(existing.Cert.NotAfter) && keep(existing) {
		return existing, nil
	}
	c, err := issue(now)
	if err != nil {
		return nil, err
	}
	if err := d.write(name, c); err != nil {
		return nil, err
	}
	return c, nil
}

// load reads the certificate called name; nil when its files are missing,
// unreadable as PEM, or do not belong together, so that it is replaced.
func (d Dir) load(name string) (*Cert, error) {
	f := d.Files(name)
	certPEM, err := os.ReadFile(f.Cert)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Cert, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.Key, err)
	}
	c, err := Parse(certPEM, keyPEM)
	if err != nil {
		return nil, nil
	}
	return c, nil
}

// Parse reads a PEM certificate and its PEM private key (PKCS #8 or SEC 1
// ECDSA), checking that they belong together.
func Parse(certPEM, keyPEM []byte) (*Cert, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("parse certificate: no CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse certificate: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("parse private key: no PEM block")
	}
	var key *ecdsa.PrivateKey
	switch kb.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
		ek, ok := k.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("parse private key: %T is not an ECDSA key", k)
		}
		key = ek
	case "EC PRIVATE KEY":
		if key, err = x509.ParseECPrivateKey(kb.Bytes); err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
	default:
		return nil, fmt.Errorf("parse private key: unexpected PEM block %q", kb.Type)
	}
	pub, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("parse certificate: the private key does not match it")
	}
	return &Cert{Cert: cert, Key: key}, nil
}

// write stores c as name, each file replaced whole so a reader never sees
// half of one.
func (d Dir) write(name string, c *Cert) error {
	if err := os.MkdirAll(d.Path, 0o700); err != nil {
		return fmt.Errorf("create certificate directory: %w", err)
	}
	keyPEM, err := c.KeyPEM()
	if err != nil {
		return err
	}
	f := d.Files(name)
	if err := WriteFile(f.Key, keyPEM, 0o600); err != nil {
		return err
	}
	return WriteFile(f.Cert, c.CertPEM(), 0o644)
}

// WriteFile replaces path with data of mode, the mode set before any byte
// is written (a key is never readable by others, even for an instant); a
// reader sees the old file or the new one, never a part.
func WriteFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
