package availability

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1client "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset/typed/apiregistration/v1"
	"k8s.io/utils/clock"

	"kplane.dev/libs/apiserver/frontproxy"
)

// Defaults of the probes' timing.
const (
	DefaultInterval = 10 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// Errors a Resolver wraps to give the reason kube gives.
var (
	// ErrServiceNotFound: the APIService's service does not exist.
	ErrServiceNotFound = errors.New("service not found")
	// ErrMissingEndpoints: the service exists but nothing serves it.
	ErrMissingEndpoints = errors.New("service has no endpoints")
)

// Endpoint is where an APIService's server is reached, and how.
type Endpoint struct {
	// URL is the server's base URL.
	URL *url.URL
	// Client reaches it: the gateway's front-proxy client certificate
	// and the APIService's CA bundle.
	Client *http.Client
}

// Resolver finds the server of an APIService: core for a local one (no
// spec.service), the service's endpoint otherwise.
type Resolver interface {
	Resolve(ctx context.Context, s *apiregistrationv1.APIService) (Endpoint, error)
}

// Option configures a Controller.
type Option func(*Controller)

// WithInterval sets how often every APIService is probed.
func WithInterval(d time.Duration) Option { return func(c *Controller) { c.interval = d } }

// WithTimeout bounds one probe.
func WithTimeout(d time.Duration) Option { return func(c *Controller) { c.timeout = d } }

// WithLogger sets where availability changes and failed writes are logged.
func WithLogger(l *slog.Logger) Option { return func(c *Controller) { c.log = l } }

// WithClock sets the clock of the conditions' lastTransitionTime.
func WithClock(clk clock.PassiveClock) Option { return func(c *Controller) { c.clock = clk } }

// Controller probes APIServices and keeps their Available condition.
type Controller struct {
	apiServices apiregistrationv1client.APIServiceInterface
	resolver    Resolver
	interval    time.Duration
	timeout     time.Duration
	log         *slog.Logger
	clock       clock.PassiveClock
	trigger     chan struct{}
}

// New returns a Controller that reads and writes APIServices through
// apiServices (core's apiservices, as the gateway) and finds their servers
// with resolver.
func New(apiServices apiregistrationv1client.APIServiceInterface, resolver Resolver, opts ...Option) (*Controller, error) {
	c := &Controller{
		apiServices: apiServices,
		resolver:    resolver,
		interval:    DefaultInterval,
		timeout:     DefaultTimeout,
		log:         slog.New(slog.DiscardHandler),
		clock:       clock.RealClock{},
		trigger:     make(chan struct{}, 1),
	}
	for _, o := range opts {
		o(c)
	}
	if c.interval <= 0 || c.timeout <= 0 {
		return nil, fmt.Errorf("availability controller: interval and timeout must be positive, got %s and %s", c.interval, c.timeout)
	}
	return c, nil
}

// Trigger asks Run to probe again soon; call it when routes change. It
// never blocks.
func (c *Controller) Trigger() {
	select {
	case c.trigger <- struct{}{}:
	default:
	}
}

// Run probes at once, then every interval and on Trigger, until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.log.Warn("update apiservice availability", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-c.trigger:
		}
	}
}

// Sync probes every APIService once and writes the conditions that
// changed.
func (c *Controller) Sync(ctx context.Context) error {
	list, err := c.apiServices.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list apiservices: %w", err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i := range list.Items {
		s := &list.Items[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.syncOne(ctx, s); err != nil {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Controller) syncOne(ctx context.Context, s *apiregistrationv1.APIService) error {
	cond := c.probe(ctx, s)
	old := condition(s)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	updated := s.DeepCopy()
	if old != nil && old.Status == cond.Status {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	setCondition(updated, cond)
	if _, err := c.apiServices.UpdateStatus(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status of apiservice %s: %w", s.Name, err)
	}
	c.log.Info("apiservice availability changed", "apiservice", s.Name, "status", string(cond.Status), "reason", cond.Reason, "message", cond.Message)
	return nil
}

func condition(s *apiregistrationv1.APIService) *apiregistrationv1.APIServiceCondition {
	for i := range s.Status.Conditions {
		if s.Status.Conditions[i].Type == apiregistrationv1.Available {
			return &s.Status.Conditions[i]
		}
	}
	return nil
}

func setCondition(s *apiregistrationv1.APIService, cond apiregistrationv1.APIServiceCondition) {
	if old := condition(s); old != nil {
		*old = cond
		return
	}
	s.Status.Conditions = append(s.Status.Conditions, cond)
}

// probe finds the server of s and asks it for the discovery document it
// must serve, with kube's reasons and messages.
func (c *Controller) probe(ctx context.Context, s *apiregistrationv1.APIService) apiregistrationv1.APIServiceCondition {
	cond := apiregistrationv1.APIServiceCondition{
		Type:               apiregistrationv1.Available,
		Status:             apiregistrationv1.ConditionTrue,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
		Reason:             "Passed",
		Message:            "all checks passed",
	}
	if s.Spec.Service == nil {
		// Served by the control plane itself, as kube's local ones: a
		// CRD's group-version is registered before its resources are
		// served, and kube reports it available all the same.
		cond.Reason, cond.Message = "Local", "Local APIServices are always available"
		return cond
	}
	ep, err := c.resolver.Resolve(ctx, s)
	if err != nil {
		cond.Status, cond.Reason, cond.Message = resolveFailure(s, err)
		return cond
	}
	if err := c.get(ctx, s, ep); err != nil {
		cond.Status, cond.Reason, cond.Message = apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error()
	}
	return cond
}

func resolveFailure(s *apiregistrationv1.APIService, err error) (apiregistrationv1.ConditionStatus, string, string) {
	if s.Spec.Service == nil {
		return apiregistrationv1.ConditionFalse, "FailedDiscoveryCheck", err.Error()
	}
	name, ns := s.Spec.Service.Name, s.Spec.Service.Namespace
	switch {
	case errors.Is(err, ErrServiceNotFound):
		return apiregistrationv1.ConditionFalse, "ServiceNotFound", fmt.Sprintf("service/%s in %q is not present", name, ns)
	case errors.Is(err, ErrMissingEndpoints):
		return apiregistrationv1.ConditionFalse, "MissingEndpoints", fmt.Sprintf("endpointslices for service/%s in %q have no addresses with port name %q", name, ns, "")
	}
	return apiregistrationv1.ConditionUnknown, "ServiceAccessError", fmt.Sprintf("service/%s in %q cannot be checked due to: %v", name, ns, err)
}

// get asks the server for /apis/<group>/<version> (/api/<version> for the
// legacy group) as system:kube-aggregator in system:masters, so its
// authorization cannot refuse; any 2xx or 3xx passes, as in kube.
func (c *Controller) get(ctx context.Context, s *apiregistrationv1.APIService, ep Endpoint) error {
	u := *ep.URL
	if s.Spec.Group == "" {
		u.Path = "/api/" + s.Spec.Version
	} else {
		u.Path = "/apis/" + s.Spec.Group + "/" + s.Spec.Version
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("failing or missing response from %v: %w", &u, err)
	}
	req.Header.Set(frontproxy.UserHeader, "system:kube-aggregator")
	req.Header.Set(frontproxy.GroupHeader, "system:masters")
	client := *ep.Client
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("failing or missing response from %v: %w", &u, err)
	}
	if err := resp.Body.Close(); err != nil {
		return fmt.Errorf("failing or missing response from %v: %w", &u, err)
	}
	if resp.StatusCode < http.StatusOK || resp.StatusCode >= http.StatusMultipleChoices {
		return fmt.Errorf("failing or missing response from %v: bad status from %v: %d", &u, &u, resp.StatusCode)
	}
	return nil
}
