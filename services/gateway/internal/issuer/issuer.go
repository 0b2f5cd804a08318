package issuer

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/natsrpc"
	protoauthn "kplane.dev/proto/authn"
)

// The paths kube serves the documents at.
const (
	DiscoveryPath = "/.well-known/openid-configuration"
	KeysPath      = "/openid/v1/jwks"
)

// cacheControl lets relying parties keep the documents for an hour, as
// kube's does.
const cacheControl = "public, max-age=3600"

// Handler returns the handler of the document at path (DiscoveryPath or
// KeysPath), fetched from authn over nc on every request: authn owns the
// keys and rotates them. The requests report to obs.
func Handler(nc *nats.Conn, path string, obs *natsrpc.Observer, log *slog.Logger) echo.HandlerFunc {
	subject, contentType := protoauthn.SubjectIssuerDiscovery, "application/json"
	if path == KeysPath {
		subject, contentType = protoauthn.SubjectIssuerKeys, "application/jwk-set+json"
	}
	return func(c echo.Context) error {
		ctx, cancel := context.WithTimeout(c.Request().Context(), natsrpc.DefaultTimeout)
		defer cancel()
		doc, err := natsrpc.Request(ctx, nc, subject, nil, natsrpc.Idempotent(), natsrpc.Observe(obs))
		if err == nil && !json.Valid(doc) {
			err = apierrors.NewInternalError(fmt.Errorf("the reply on %s is not JSON", subject))
		}
		if err != nil {
			log.Warn("fetch issuer document", "subject", subject, "err", err)
			return apistatus.Write(c, err)
		}
		c.Response().Header().Set("Cache-Control", cacheControl)
		return c.Blob(http.StatusOK, contentType, doc)
	}
}
