package serviceaccount

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"fmt"
)

// PublicKey is a verification key and its key id.
type PublicKey struct {
	KeyID string
	Key   crypto.PublicKey
}

// PublicKeysGetter gives the keys that may have signed a token. An
// implementation that reloads keys from files or a KMS returns the current set
// on each call.
type PublicKeysGetter interface {
	// PublicKeys returns the keys with the given key id, or every key when
	// keyID is empty (a token without a kid header).
	PublicKeys(keyID string) []PublicKey
}

// StaticKeys is a fixed set of verification keys.
type StaticKeys struct {
	all  []PublicKey
	byID map[string][]PublicKey
}

var _ PublicKeysGetter = (*StaticKeys)(nil)

// NewStaticKeys returns a key set; each key's id is derived with KeyID.
// Private keys are accepted and stand for their public half.
func NewStaticKeys(keys ...crypto.PublicKey) (*StaticKeys, error) {
	s := &StaticKeys{byID: make(map[string][]PublicKey)}
	for _, k := range keys {
		if priv, ok := k.(crypto.Signer); ok {
			k = priv.Public()
		}
		id, err := KeyID(k)
		if err != nil {
			return nil, err
		}
		pk := PublicKey{KeyID: id, Key: k}
		s.all = append(s.all, pk)
		s.byID[id] = append(s.byID[id], pk)
	}
	return s, nil
}

// PublicKeys implements PublicKeysGetter.
func (s *StaticKeys) PublicKeys(keyID string) []PublicKey {
	if keyID == "" {
		return s.all
	}
	return s.byID[keyID]
}

// KeyID derives a key id as kube-apiserver does: the unpadded base64url
// SHA-256 of the key's DER-encoded SubjectPublicKeyInfo. Outside verifiers
// (the JWKS document) see the same ids.
func KeyID(pub crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("derive key id: %w", err)
	}
	sum := sha256.Sum256(der)
	return base64.RawURLEncoding.EncodeToString(sum[:]), nil
}
