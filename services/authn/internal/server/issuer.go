package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"

	"kplane.dev/services/authn/internal/authenticator/oidc"
	"kplane.dev/services/authn/internal/authenticator/serviceaccount"
)

// jwksPath is where kube publishes the issuer's keys.
const jwksPath = "/openid/v1/jwks"

// issuerDocuments are kube's service account issuer discovery document and
// key set, built once: the keys do not change while authn runs.
func issuerDocuments(issuer string, keys []serviceaccount.PublicKey) (discovery, jwks []byte, err error) {
	jwksURI, err := url.JoinPath(issuer, jwksPath)
	if err != nil {
		return nil, nil, fmt.Errorf("issuer %q: %w", issuer, err)
	}
	set := struct {
		Keys []map[string]string `json:"keys"`
	}{Keys: []map[string]string{}}
	var algs []string
	for _, k := range keys {
		jwk, err := oidc.JWK(k.KeyID, k.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("publish key %s: %w", k.KeyID, err)
		}
		set.Keys = append(set.Keys, jwk)
		algs = append(algs, alg(k))
	}
	slices.Sort(algs)
	algs = slices.Compact(algs)
	if jwks, err = json.Marshal(set); err != nil {
		return nil, nil, fmt.Errorf("encode key set: %w", err)
	}
	discovery, err = json.Marshal(struct {
		Issuer        string   `json:"issuer"`
		JWKSURI       string   `json:"jwks_uri"`
		ResponseTypes []string `json:"response_types_supported"`
		SubjectTypes  []string `json:"subject_types_supported"`
		SigningAlgs   []string `json:"id_token_signing_alg_values_supported"`
	}{issuer, jwksURI, []string{"id_token"}, []string{"public"}, algs})
	if err != nil {
		return nil, nil, fmt.Errorf("encode discovery document: %w", err)
	}
	return discovery, jwks, nil
}

func alg(k serviceaccount.PublicKey) string {
	switch pub := k.Key.(type) {
	case *rsa.PublicKey:
		return "RS256"
	case *ecdsa.PublicKey:
		switch pub.Curve {
		case elliptic.P384():
			return "ES384"
		case elliptic.P521():
			return "ES512"
		}
		return "ES256"
	}
	return ""
}
