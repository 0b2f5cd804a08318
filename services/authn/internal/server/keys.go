package server

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"

	"k8s.io/client-go/util/keyutil"
)

// loadSigningKey reads a PEM RSA or ECDSA private key.
func loadSigningKey(path string) (crypto.Signer, error) {
	k, err := keyutil.PrivateKeyFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("load --service-account-signing-key-file: %w", err)
	}
	switch k := k.(type) {
	case *rsa.PrivateKey:
		return k, nil
	case *ecdsa.PrivateKey:
		return k, nil
	default:
		return nil, fmt.Errorf("load --service-account-signing-key-file: unsupported key type %T, want RSA or ECDSA", k)
	}
}

// loadPublicKeys reads verification keys as kube does: each file holds PEM
// public keys, private keys (standing for their public half) or
// certificates (their key), in any mix.
func loadPublicKeys(paths []string) ([]crypto.PublicKey, error) {
	var out []crypto.PublicKey
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("load --service-account-key-file: %w", err)
		}
		n := len(out)
		for rest := data; ; {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			if block.Type == "CERTIFICATE" {
				cert, err := x509.ParseCertificate(block.Bytes)
				if err != nil {
					return nil, fmt.Errorf("load --service-account-key-file %s: %w", path, err)
				}
				out = append(out, cert.PublicKey)
				continue
			}
			keys, err := keyutil.ParsePublicKeysPEM(pem.EncodeToMemory(block))
			if err != nil {
				return nil, fmt.Errorf("load --service-account-key-file %s: %w", path, err)
			}
			for _, k := range keys {
				out = append(out, k)
			}
		}
		if len(out) == n {
			return nil, fmt.Errorf("load --service-account-key-file %s: no PEM keys or certificates", path)
		}
	}
	return out, nil
}
