package serviceaccount

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// Signer signs tokens for one issuer with one private key.
type Signer struct {
	issuer string
	key    crypto.Signer
	method jwt.SigningMethod
	keyID  string
	header string // the encoded JOSE header, the same for every token
}

// NewSigner returns a Signer for issuer. An RSA key signs with RS256, an
// ECDSA key with ES256, ES384 or ES512 by its curve, as kube-apiserver does.
func NewSigner(issuer string, key crypto.Signer) (*Signer, error) {
	if issuer == "" {
		return nil, errors.New("new token signer: issuer is required")
	}
	var method jwt.SigningMethod
	switch k := key.(type) {
	case *rsa.PrivateKey:
		method = jwt.SigningMethodRS256
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			method = jwt.SigningMethodES256
		case elliptic.P384():
			method = jwt.SigningMethodES384
		case elliptic.P521():
			method = jwt.SigningMethodES512
		default:
			return nil, errors.New("new token signer: unknown private key curve, must be 256, 384, or 521")
		}
	default:
		return nil, fmt.Errorf("new token signer: unsupported key type %T, must be *rsa.PrivateKey or *ecdsa.PrivateKey", key)
	}
	keyID, err := KeyID(key.Public())
	if err != nil {
		return nil, fmt.Errorf("new token signer: %w", err)
	}
	header, err := json.Marshal(jwtHeader{Alg: method.Alg(), Kid: keyID})
	if err != nil {
		return nil, fmt.Errorf("new token signer: encode header: %w", err)
	}
	return &Signer{
		issuer: issuer,
		key:    key,
		method: method,
		keyID:  keyID,
		header: base64.RawURLEncoding.EncodeToString(header),
	}, nil
}

// KeyID is the kid this signer puts in the header of its tokens.
func (s *Signer) KeyID() string { return s.keyID }

// Public is the key that verifies this signer's tokens.
func (s *Signer) Public() crypto.PublicKey { return s.key.Public() }

// Sign returns a compact JWS of claims, with the signer's issuer as iss.
func (s *Signer) Sign(claims *Claims) (string, error) {
	c := *claims
	c.Issuer = s.issuer
	payload, err := json.Marshal(&c)
	if err != nil {
		return "", fmt.Errorf("sign token: encode claims: %w", err)
	}
	var b strings.Builder
	b.WriteString(s.header)
	b.WriteByte('.')
	b.WriteString(base64.RawURLEncoding.EncodeToString(payload))
	sig, err := s.method.Sign(b.String(), s.key)
	if err != nil {
		return "", fmt.Errorf("sign token: %w", err)
	}
	b.WriteByte('.')
	b.WriteString(base64.RawURLEncoding.EncodeToString(sig))
	return b.String(), nil
}

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid,omitempty"`
}
