package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"kplane.dev/services/gateway/internal/audit"
)

const (
	// DefaultInitialBackoff is kube's --audit-webhook-initial-backoff.
	DefaultInitialBackoff = 10 * time.Second
	// webhookAttempts, backoffFactor and backoffJitter are kube's
	// webhook backoff: five attempts, each wait 1.5 times the last, up
	// to a fifth more.
	webhookAttempts = 5
	backoffFactor   = 1.5
	backoffJitter   = 0.2
	// webhookTimeout bounds one attempt, as kube's webhook client does.
	webhookTimeout = 30 * time.Second
	// maxErrorBody bounds what is read of a failed answer for the error.
	maxErrorBody = 4 << 10
)

// Webhook posts batches of events as an audit.k8s.io/v1 EventList to the
// server of a kubeconfig, as kube's audit webhook backend does.
type Webhook struct {
	url     string
	client  *http.Client
	backoff time.Duration
	clock   clock.Clock
}

var _ audit.Sink = (*Webhook)(nil)

// WebhookOption configures a Webhook.
type WebhookOption func(*Webhook)

// WithInitialBackoff sets the wait before the first retry.
func WithInitialBackoff(d time.Duration) WebhookOption { return func(w *Webhook) { w.backoff = d } }

// WithWebhookClock sets the clock retries wait on.
func WithWebhookClock(c clock.Clock) WebhookOption { return func(w *Webhook) { w.clock = c } }

// NewWebhook reads the kubeconfig at path: its current context's cluster
// is the webhook (server, certificate authority) and its user the
// gateway's credentials towards it.
func NewWebhook(path string, opts ...WebhookOption) (*Webhook, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("read audit webhook kubeconfig: %w", err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("audit webhook client: %w", err)
	}
	w := &Webhook{url: cfg.Host, client: client, backoff: DefaultInitialBackoff, clock: clock.RealClock{}}
	for _, o := range opts {
		o(w)
	}
	return w, nil
}

// Send posts events as one EventList, retrying with backoff when the
// webhook cannot be reached or answers 429 or 5xx.
func (w *Webhook) Send(ctx context.Context, events []audit.Encoded) error {
	body := eventList(events)
	wait := w.backoff
	var err error
	for attempt := 1; ; attempt++ {
		var retry bool
		if retry, err = w.post(ctx, body); err == nil || !retry || attempt == webhookAttempts {
			break
		}
		t := w.clock.NewTimer(wait + time.Duration(rand.Float64()*backoffJitter*float64(wait)))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C():
		}
		wait = time.Duration(float64(wait) * backoffFactor)
	}
	return err
}

// post sends body once; retry says whether another attempt may succeed.
func (w *Webhook) post(parent context.Context, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(parent, webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return false, fmt.Errorf("audit webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return parent.Err() == nil, fmt.Errorf("post audit events: %w", err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	retry = resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
	return retry, fmt.Errorf("audit webhook answered %s: %s", resp.Status, bytes.TrimSpace(msg))
}

// eventList joins encoded events into an EventList without decoding
// them again.
func eventList(events []audit.Encoded) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"kind":"EventList","apiVersion":%q,"metadata":{},"items":[`, auditv1.SchemeGroupVersion.String())
	for i, ev := range events {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(ev.JSON)
	}
	b.WriteString("]}")
	return b.Bytes()
}
