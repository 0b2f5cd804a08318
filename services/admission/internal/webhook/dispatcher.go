package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"kplane.dev/libs/tracing"
	"kplane.dev/services/admission/internal/review"
)

// Configurations are the webhook configurations in force, usually an
// informer's lister.
type Configurations interface {
	Mutating() ([]*admissionregistrationv1.MutatingWebhookConfiguration, error)
	Validating() ([]*admissionregistrationv1.ValidatingWebhookConfiguration, error)
}

// Namespaces gives the namespace of a namespaced write, whose labels a
// namespaceSelector matches. A missing namespace is an apierrors NotFound.
type Namespaces interface {
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Resolver turns a webhook's service reference into the address to dial.
type Resolver interface {
	ResolveEndpoint(namespace, name string, port int32) (*url.URL, error)
}

// Config is what a Dispatcher needs.
type Config struct {
	Configurations Configurations
	Namespaces     Namespaces
	// Resolver is needed only by webhooks that name a service.
	Resolver Resolver
	// Logger records the webhooks that failed open; slog.Default when nil.
	Logger *slog.Logger
	// Registerer takes kube's webhook metrics; nil registers none.
	Registerer prometheus.Registerer
	// Authorizer answers the authorizer variable of matchConditions;
	// without it a condition that reads the variable is in error.
	Authorizer authorizer.UnconditionalAuthorizer
	// Tracing, when not nil, spans each call and sends its trace context
	// to the webhook.
	Tracing *tracing.Provider
}

// Dispatcher calls the webhooks that match a write. It is safe for
// concurrent use.
type Dispatcher struct {
	cfg        Config
	metrics    *metrics
	clients    clients
	conditions *conditions
}

// New makes a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Configurations == nil {
		return nil, errors.New("webhook dispatcher: no Configurations")
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("webhook dispatcher: no Namespaces")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Dispatcher{cfg: cfg, metrics: m, clients: clients{resolver: cfg.Resolver, tracing: cfg.Tracing, byKey: map[string]*client{}}, conditions: newConditions()}, nil
}

// recorder gathers the warnings and audit annotations of one phase, from
// webhooks that may run in parallel.
type recorder struct {
	mu          sync.Mutex
	warnings    []string
	seen        map[string]bool
	annotations map[string]string
}

func (r *recorder) warn(ws []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		// kube's warning recorder shows a repeated warning once.
		if r.seen[w] {
			continue
		}
		if r.seen == nil {
			r.seen = map[string]bool{}
		}
		r.seen[w] = true
		r.warnings = append(r.warnings, w)
	}
}

func (r *recorder) annotate(key, value string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.annotations == nil {
		r.annotations = map[string]string{}
	}
	// kube's audit keeps the first value a key was given.
	if _, ok := r.annotations[key]; !ok {
		r.annotations[key] = value
	}
}

func (r *recorder) result(obj *unstructured.Unstructured) *review.Result {
	return &review.Result{Object: obj, Warnings: r.warnings, AuditAnnotations: r.annotations}
}

// hook is one webhook of a configuration, mutating or validating, with
// what both kinds share.
type hook struct {
	name          string
	configuration string
	// index is the webhook's place in its configuration, which names it
	// for reinvocation when several configurations reuse a name.
	index              int
	clientConfig       admissionregistrationv1.WebhookClientConfig
	rules              []admissionregistrationv1.RuleWithOperations
	matchPolicy        *admissionregistrationv1.MatchPolicyType
	failurePolicy      *admissionregistrationv1.FailurePolicyType
	sideEffects        *admissionregistrationv1.SideEffectClass
	timeoutSeconds     *int32
	namespaceSelector  *metav1.LabelSelector
	objectSelector     *metav1.LabelSelector
	reviewVersions     []string
	reinvocationPolicy *admissionregistrationv1.ReinvocationPolicyType
	matchConditions    []admissionregistrationv1.MatchCondition
}

func (h *hook) id() string { return fmt.Sprintf("%s/%d", h.configuration, h.index) }

func (h *hook) ignoresFailures() bool {
	return h.failurePolicy != nil && *h.failurePolicy == admissionregistrationv1.Ignore
}

func (d *Dispatcher) mutatingHooks() ([]*hook, error) {
	cs, err := d.cfg.Configurations.Mutating()
	if err != nil {
		return nil, fmt.Errorf("listing mutating webhook configurations: %w", err)
	}
	// kube calls mutating webhooks in the order of their configurations'
	// names, and in each configuration in its order.
	cs = append([]*admissionregistrationv1.MutatingWebhookConfiguration(nil), cs...)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	var hs []*hook
	for _, c := range cs {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			hs = append(hs, &hook{
				name: w.Name, configuration: c.Name, index: i,
				clientConfig: w.ClientConfig, rules: w.Rules, matchPolicy: w.MatchPolicy,
				failurePolicy: w.FailurePolicy, sideEffects: w.SideEffects,
				timeoutSeconds: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions,
				namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				reinvocationPolicy: w.ReinvocationPolicy, matchConditions: w.MatchConditions,
			})
		}
	}
	return hs, nil
}

func (d *Dispatcher) validatingHooks() ([]*hook, error) {
	cs, err := d.cfg.Configurations.Validating()
	if err != nil {
		return nil, fmt.Errorf("listing validating webhook configurations: %w", err)
	}
	cs = append([]*admissionregistrationv1.ValidatingWebhookConfiguration(nil), cs...)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Name < cs[j].Name })
	var hs []*hook
	for _, c := range cs {
		for i := range c.Webhooks {
			w := &c.Webhooks[i]
			hs = append(hs, &hook{
				name: w.Name, configuration: c.Name, index: i,
				clientConfig: w.ClientConfig, rules: w.Rules, matchPolicy: w.MatchPolicy,
				failurePolicy: w.FailurePolicy, sideEffects: w.SideEffects,
				timeoutSeconds: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions,
				namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				matchConditions: w.MatchConditions,
			})
		}
	}
	return hs, nil
}
