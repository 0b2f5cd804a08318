package oidctest

import (
	"crypto/x509"
	"encoding/pem"
)

func pemCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}
