package server

import (
	"crypto/x509"
	"encoding/pem"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func asStatus(err error, se *apierrors.APIStatus) bool { return errors.As(err, se) }

func certPEM(e *env) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: e.client.Certificate[0]})
}

func pemKey(e *env) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(e.client.PrivateKey)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
