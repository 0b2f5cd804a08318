package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"kplane.dev/libs/apiserver/apistatus"
	"kplane.dev/libs/apiserver/frontproxy"

	"kplane.dev/services/authn/internal/authenticator"
)

// tokenReviewPath is where kube's token webhooks are POSTed.
const tokenReviewPath = "/apis/authentication.k8s.io/v1/tokenreviews"

// maxReviewBytes bounds a review's body: a token and a few audiences.
const maxReviewBytes = 1 << 20

var errAudiences = apierrors.NewInternalError(errors.New("error validating audiences"))

// review answers a TokenReview as kube's tokenreviews REST does.
func (s *Server) review(ctx context.Context, tr *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	start := s.clock.Now()
	// kube counts a refusal with an error (a token that does not parse)
	// as an error, kplane's own counter as unauthenticated.
	result, kubeResult := resultError, kubeError
	defer func() {
		seconds := s.clock.Since(start).Seconds()
		s.metrics.reviewDuration.Observe(seconds)
		s.metrics.reviewed(result, kubeResult, seconds)
	}()
	if tr.Spec.Token == "" {
		return nil, apierrors.NewBadRequest("token is required for TokenReview in authentication")
	}
	auds := authenticator.Audiences(tr.Spec.Audiences)
	if len(auds) == 0 {
		auds = s.cfg.apiAuds
	}
	if len(auds) > 0 {
		ctx = authenticator.WithAudiences(ctx, auds)
	}
	resp, ok, err := s.reviewer.AuthenticateToken(ctx, tr.Spec.Token)
	out := tr.DeepCopy()
	out.APIVersion, out.Kind = "authentication.k8s.io/v1", "TokenReview"
	out.Status = authenticationv1.TokenReviewStatus{Authenticated: ok}
	if err != nil {
		out.Status.Error = err.Error()
	}
	if ok && len(auds) > 0 && len(auds.Intersect(resp.Audiences)) == 0 {
		s.log.Error("authenticator answered for other audiences", "want", []string(auds), "got", []string(resp.Audiences))
		return nil, errAudiences
	}
	if !ok {
		result = resultUnauthenticated
		if err == nil {
			kubeResult = kubeFailure
		}
		return out, nil
	}
	result, kubeResult = resultAuthenticated, kubeSuccess
	u := resp.User
	out.Status.User = authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
	if len(u.Extra) > 0 {
		out.Status.User.Extra = make(map[string]authenticationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			out.Status.User.Extra[k] = v
		}
	}
	out.Status.Audiences = resp.Audiences
	return out, nil
}

// serveTokenReview answers proto/authn.SubjectTokenReview.
func (s *Server) serveTokenReview(ctx context.Context, payload []byte) ([]byte, error) {
	var tr authenticationv1.TokenReview
	if err := json.Unmarshal(payload, &tr); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("decode TokenReview: %v", err))
	}
	out, err := s.review(ctx, &tr)
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

// httpTokenReview is kube's token webhook contract. The caller must have
// presented a client certificate of --client-ca-file; the reply keeps the
// apiVersion the caller sent, as kube-apiserver may speak v1beta1, whose
// TokenReview has the same fields.
func (s *Server) httpTokenReview(c echo.Context) error {
	r := c.Request()
	if _, err := frontproxy.VerifyClient(r, s.cfg.serving.ClientCA); err != nil {
		s.log.Debug("token review refused", "remote", r.RemoteAddr, "err", err)
		return apistatus.Write(c, apierrors.NewUnauthorized("Unauthorized"))
	}
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(http.MaxBytesReader(c.Response(), r.Body, maxReviewBytes)).Decode(&tr); err != nil {
		return apistatus.Write(c, apierrors.NewBadRequest(fmt.Sprintf("decode TokenReview: %v", err)))
	}
	apiVersion := tr.APIVersion
	out, err := s.review(r.Context(), &tr)
	if err != nil {
		return apistatus.Write(c, err)
	}
	if apiVersion == "authentication.k8s.io/v1beta1" {
		out.APIVersion = apiVersion
	}
	return c.JSON(http.StatusOK, out)
}
