package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"kplane.dev/services/authn/internal/authenticator"
)

// Defaults of kube-apiserver's webhook token authenticator.
const (
	DefaultCacheTTL = 2 * time.Minute
	// DefaultTimeout bounds one review.
	DefaultTimeout = 10 * time.Second
	maxReplyBytes  = 1 << 20
)

// Authenticator asks a remote TokenReview service.
type Authenticator struct {
	url          string
	client       *http.Client
	implicitAuds authenticator.Audiences
}

var _ authenticator.Authenticator = (*Authenticator)(nil)

// NewFromFile reads a kubeconfig-format config file. implicitAuds are the
// server's own audiences: the audiences the remote service is taken to
// have checked when its reply names none.
func NewFromFile(path string, implicitAuds authenticator.Audiences) (*Authenticator, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("load token webhook config %s: %w", path, err)
	}
	return New(cfg, implicitAuds)
}

// New asks the service at cfg.Host (its full URL, as a kubeconfig's
// cluster server gives it) with cfg's TLS settings.
func New(cfg *restclient.Config, implicitAuds authenticator.Audiences) (*Authenticator, error) {
	if cfg.Host == "" {
		return nil, errors.New("token webhook config: cluster server is required")
	}
	client, err := restclient.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("token webhook client: %w", err)
	}
	if client.Timeout == 0 {
		client.Timeout = DefaultTimeout
	}
	return &Authenticator{url: cfg.Host, client: client, implicitAuds: implicitAuds}, nil
}

// AuthenticateToken implements authenticator.Authenticator, with kube's
// audience rules: a caller that asks for audiences sends them; the reply's
// audiences, or the implicit ones when it names none, must meet them, or
// the answer is no opinion.
func (a *Authenticator) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	want, checkAuds := authenticator.AudiencesFrom(ctx)
	review := &authenticationv1.TokenReview{
		TypeMeta: metaTokenReview,
		Spec:     authenticationv1.TokenReviewSpec{Token: token, Audiences: want},
	}
	got, err := a.post(ctx, review)
	if err != nil {
		return nil, false, err
	}
	var auds authenticator.Audiences
	if checkAuds {
		gotAuds := a.implicitAuds
		if len(got.Status.Audiences) > 0 {
			gotAuds = got.Status.Audiences
		}
		auds = want.Intersect(gotAuds)
		if len(auds) == 0 {
			return nil, false, nil
		}
	}
	if !got.Status.Authenticated {
		if got.Status.Error != "" {
			return nil, false, errors.New(got.Status.Error)
		}
		return nil, false, nil
	}
	u := got.Status.User
	resp := &authenticator.Response{
		User:      authenticator.UserInfo{Name: u.Username, UID: u.UID, Groups: u.Groups},
		Audiences: auds,
	}
	if len(u.Extra) > 0 {
		resp.User.Extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			resp.User.Extra[k] = v
		}
	}
	return resp, true, nil
}

// metaTokenReview is the apiVersion and kind every review carries, so that
// a strict decoder on the other side accepts it.
var metaTokenReview = metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"}

func (a *Authenticator) post(ctx context.Context, review *authenticationv1.TokenReview) (*authenticationv1.TokenReview, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, fmt.Errorf("encode token review: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("token webhook: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("token webhook: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes))
	if err != nil {
		return nil, fmt.Errorf("token webhook: read reply: %w", err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("token webhook: %s", resp.Status)
	}
	var out authenticationv1.TokenReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("token webhook: decode reply: %w", err)
	}
	return &out, nil
}
