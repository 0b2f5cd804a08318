package authorizer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"kplane.dev/proto/authz"
)

// Kube's webhook authorizer defaults (--authorization-webhook-cache-*-ttl).
const (
	DefaultAuthorizedTTL   = 5 * time.Minute
	DefaultUnauthorizedTTL = 30 * time.Second
	// webhookTimeout bounds one call, kube's default for the webhook.
	webhookTimeout = 30 * time.Second
	// maxCacheEntries bounds the decision cache, as kube's LRU does; when
	// full, expired entries go first and then the whole cache.
	maxCacheEntries = 8192
)

// Webhook asks a SubjectAccessReview webhook, as kube's webhook authorizer
// (k8s.io/apiserver/plugin/pkg/authorizer/webhook) does: status.allowed
// allows, status.denied denies, anything else has no opinion; a failed call
// has no opinion and returns the error. Answers are cached by the request's
// spec: allowed ones for authorizedTTL, the others for unauthorizedTTL.
type Webhook struct {
	url    string
	client *http.Client
	clock  clock.PassiveClock

	authorizedTTL, unauthorizedTTL time.Duration

	mu    sync.Mutex
	cache map[string]cached
	// metrics records calls and cache lookups; nil records nothing.
	metrics *WebhookMetrics
}

type cached struct {
	status  authorizationv1.SubjectAccessReviewStatus
	expires time.Time
}

var _ Authorizer = (*Webhook)(nil)

// WebhookOption changes a Webhook.
type WebhookOption func(*Webhook)

// WithCacheTTLs sets how long allowed and other answers are cached.
func WithCacheTTLs(authorized, unauthorized time.Duration) WebhookOption {
	return func(w *Webhook) { w.authorizedTTL, w.unauthorizedTTL = authorized, unauthorized }
}

// WithClock sets the clock that expires cached answers.
func WithClock(c clock.PassiveClock) WebhookOption {
	return func(w *Webhook) { w.clock = c }
}

// LoadWebhookConfig reads kube's kubeconfig-format webhook configuration:
// the current context's cluster is the webhook (its server URL is posted
// to as is), its user the credentials kplane presents.
func LoadWebhookConfig(file string) (*restclient.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", file)
	if err != nil {
		return nil, fmt.Errorf("load webhook config %s: %w", file, err)
	}
	return cfg, nil
}

// NewWebhook returns the Webhook mode that posts to cfg's server.
func NewWebhook(cfg *restclient.Config, opts ...WebhookOption) (*Webhook, error) {
	cfg = restclient.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = webhookTimeout
	}
	client, err := restclient.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("build webhook client: %w", err)
	}
	w := &Webhook{
		url:             cfg.Host,
		client:          client,
		clock:           clock.RealClock{},
		authorizedTTL:   DefaultAuthorizedTTL,
		unauthorizedTTL: DefaultUnauthorizedTTL,
		cache:           map[string]cached{},
	}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// Mode is w as an --authorization-mode. Like kube's webhook it cannot list
// rules, so its rules review is empty and incomplete.
func (w *Webhook) Mode() Mode {
	return Mode{Name: "Webhook", Authorizer: w, RuleResolver: incomplete{}}
}

// Authorize asks the webhook, or answers from the cache.
func (w *Webhook) Authorize(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (Decision, string, error) {
	key, err := json.Marshal(spec)
	if err != nil {
		return NoOpinion, "", fmt.Errorf("encode webhook request: %w", err)
	}
	status, ok := w.lookup(string(key))
	w.metrics.lookup(ok)
	if !ok {
		status, err = w.call(ctx, spec)
		w.metrics.called(err)
		if err != nil {
			return NoOpinion, "", err
		}
		w.store(string(key), status)
	}
	switch {
	case status.Allowed:
		return Allow, status.Reason, nil
	case status.Denied:
		return Deny, status.Reason, nil
	default:
		return NoOpinion, status.Reason, nil
	}
}

func (w *Webhook) call(ctx context.Context, spec *authorizationv1.SubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	var none authorizationv1.SubjectAccessReviewStatus
	review := authorizationv1.SubjectAccessReview{Spec: *spec}
	review.APIVersion = authorizationv1.SchemeGroupVersion.String()
	review.Kind = "SubjectAccessReview"
	body, err := json.Marshal(review)
	if err != nil {
		return none, fmt.Errorf("encode webhook request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return none, fmt.Errorf("build webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return none, fmt.Errorf("call authorization webhook: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return none, fmt.Errorf("read authorization webhook answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return none, fmt.Errorf("authorization webhook answered %d", resp.StatusCode)
	}
	var out authorizationv1.SubjectAccessReview
	if err := json.Unmarshal(data, &out); err != nil {
		return none, fmt.Errorf("decode authorization webhook answer: %w", err)
	}
	return out.Status, nil
}

func (w *Webhook) lookup(key string) (authorizationv1.SubjectAccessReviewStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.cache[key]
	if !ok || !w.clock.Now().Before(c.expires) {
		return authorizationv1.SubjectAccessReviewStatus{}, false
	}
	return c.status, true
}

func (w *Webhook) store(key string, status authorizationv1.SubjectAccessReviewStatus) {
	ttl := w.unauthorizedTTL
	if status.Allowed {
		ttl = w.authorizedTTL
	}
	if ttl <= 0 {
		return
	}
	now := w.clock.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.cache) >= maxCacheEntries {
		for k, c := range w.cache {
			if !now.Before(c.expires) {
				delete(w.cache, k)
			}
		}
		if len(w.cache) >= maxCacheEntries {
			clear(w.cache)
		}
	}
	w.cache[key] = cached{status: status, expires: now.Add(ttl)}
}

// incomplete lists no rules and says the list is incomplete.
type incomplete struct{}

func (incomplete) RulesFor(context.Context, *authz.RulesReview) (Rules, error) {
	return Rules{Incomplete: true}, nil
}
