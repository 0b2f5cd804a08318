package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/kubernetes"

	"kplane.dev/libs/apiserver/authzreview"
	"kplane.dev/libs/healthz"
	"kplane.dev/libs/metrics"
	"kplane.dev/libs/natsrpc"
	"kplane.dev/libs/profiling"
	"kplane.dev/libs/serving"
	"kplane.dev/proto/admission"
	"kplane.dev/services/admission/internal/chain"
	"kplane.dev/services/admission/internal/convert"
	"kplane.dev/services/admission/internal/feed"
	"kplane.dev/services/admission/internal/policy/mutating"
	"kplane.dev/services/admission/internal/policy/params"
	"kplane.dev/services/admission/internal/policy/rego"
	"kplane.dev/services/admission/internal/policy/validating"
	"kplane.dev/services/admission/internal/review"
	"kplane.dev/services/admission/internal/typecheck"
	"kplane.dev/services/admission/internal/webhook"
)

// Chain decides one phase of a write.
type Chain interface {
	Mutate(ctx context.Context, r *admission.Review) (*admission.Verdict, error)
	Validate(ctx context.Context, r *admission.Review) (*admission.Verdict, error)
}

// Server is one replica of the admission service.
type Server struct {
	cfg  *Config
	log  *slog.Logger
	nats *nats.Conn
	ln   net.Listener
	http *http.Server
	rpc  *natsrpc.Server
	// reviews is what the reviews answered and asked for over NATS report
	// to.
	reviews *natsrpc.Observer
	chain   Chain
	// sources follow the configuration the steps read; the chain
	// decides once every one has read it.
	sources  []source
	registry *prometheus.Registry
	// steps observes each phase as kube's
	// apiserver_admission_step_admission_duration_seconds does.
	steps    *prometheus.HistogramVec
	shutdown *serving.Shutdown
}

// New builds a replica from cfg; Run serves it.
func New(cfg *Config) (*Server, error) {
	reg, err := metrics.NewRegistry()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.log, registry: reg}
	s.steps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "apiserver_admission_step_admission_duration_seconds",
		Help:    "Admission sub-step latency histogram in seconds, broken out for each operation and API resource and step type (validate or admit).",
		Buckets: []float64{0.005, 0.025, 0.1, 0.5, 1.0, 2.5},
	}, []string{"type", "operation", "rejected"})
	if err := s.registry.Register(s.steps); err != nil {
		return nil, fmt.Errorf("register metrics: %w", err)
	}
	if s.reviews, err = natsrpc.NewObserver(cfg.serving.Tracing, s.registry); err != nil {
		return nil, err
	}
	nc, err := cfg.nats.Connect("kplane-admission")
	if err != nil {
		return nil, err
	}
	s.nats = nc
	if err := s.buildChain(); err != nil {
		nc.Close()
		return nil, err
	}
	s.rpc = natsrpc.NewServer(nc, s.log, natsrpc.WithObserver(s.reviews))
	s.shutdown = cfg.serving.NewShutdown(s.drain)
	s.http = cfg.serving.NewServer(s.handler())
	ln, err := cfg.serving.Listen()
	if err != nil {
		nc.Close()
		return nil, err
	}
	s.ln = ln
	return s, nil
}

// authzTimeout bounds one question of an expression's authorizer to
// authz.
const authzTimeout = 5 * time.Second

// source is configuration followed while the server runs.
type source interface {
	Run(ctx context.Context) error
	HasSynced() bool
}

// synced says whether every source has read its configuration once.
func (s *Server) synced() bool {
	for _, src := range s.sources {
		if !src.HasSynced() {
			return false
		}
	}
	return true
}

// buildChain builds the steps over the configuration the sources follow.
func (s *Server) buildChain() error {
	var (
		mutators   []chain.Mutator
		validators []chain.Validator
		client     kubernetes.Interface
	)
	if s.cfg.api == nil {
		s.log.Warn("no --kubeconfig: no webhook or admission policy can be configured, only the policy directory")
	} else {
		cs, err := kubernetes.NewForConfig(s.cfg.api)
		if err != nil {
			return fmt.Errorf("build the API client: %w", err)
		}
		client = cs
		f := feed.New(client, s.log)
		// The authorizer of CEL expressions asks authz, as core's
		// escalation checks do.
		authz := authzreview.NewKubeAuthorizer(authzreview.NewNATS(s.nats, authzTimeout, s.reviews))
		webhooks, err := webhook.New(webhook.Config{Configurations: f, Namespaces: f, Resolver: s.cfg.resolver, Logger: s.log, Registerer: s.registry, Authorizer: authz, Tracing: s.cfg.serving.Tracing})
		if err != nil {
			return err
		}
		ps, err := params.New(params.Config{REST: s.cfg.api, Logger: s.log})
		if err != nil {
			return err
		}
		vapPolicies, mapPolicies := f.ValidatingPolicies(), f.MutatingPolicies()
		vaps, err := validating.New(validating.Config{Policies: vapPolicies, Namespaces: f, Params: ps, Registerer: s.registry, Logger: s.log, Authorizer: authz})
		if err != nil {
			return err
		}
		maps, err := mutating.New(mutating.Config{Policies: mapPolicies, Namespaces: f, Params: ps, Logger: s.log, Authorizer: authz})
		if err != nil {
			return err
		}
		s.sources = append(s.sources, f, alwaysSynced{ps}, alwaysSynced{typecheck.New(vapPolicies, client, time.Second, s.log)})
		// kube's order: policies, then webhooks, in each phase.
		mutators = append(mutators, policiesThenWebhooks{policies: maps, bindings: mapPolicies, webhooks: webhooks})
		validators = append(validators, vapStep{v: vaps, bindings: vapPolicies}, webhooks)
	}
	if s.cfg.policyDir != "" || client != nil {
		cfg := rego.Config{Dir: s.cfg.policyDir, Logger: s.log}
		if client != nil {
			cfg.Client, cfg.Namespace = client, s.cfg.policyNamespace
		}
		policies, err := rego.New(cfg)
		if err != nil {
			return err
		}
		s.sources = append(s.sources, policies)
		validators = append(validators, regoStep{policies})
	}
	converters, err := convert.New(s.cfg.resolver)
	if err != nil {
		return err
	}
	c, err := chain.New(chain.Config{
		Synced:     s.synced,
		StartUsers: s.cfg.startUsers,
		Mutators:   mutators,
		Validators: validators,
		Converters: converters,
		Tracing:    s.cfg.serving.Tracing,
	})
	s.chain = c
	return err
}

// alwaysSynced is a source with nothing to read before it can answer:
// the param informers start when a binding first asks for them, and the
// type checker only writes.
type alwaysSynced struct {
	runner interface{ Run(context.Context) error }
}

func (a alwaysSynced) Run(ctx context.Context) error { return a.runner.Run(ctx) }
func (alwaysSynced) HasSynced() bool                 { return true }

// vapStep is the ValidatingAdmissionPolicies as a validating step.
type vapStep struct {
	v        *validating.Validator
	bindings interface {
		Bindings() ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error)
	}
}

// MayValidate says whether any binding exists: a binding's policy is
// not looked into, which is cheap and errs towards asking.
func (s vapStep) MayValidate(*review.Attributes) bool {
	bs, err := s.bindings.Bindings()
	return err != nil || len(bs) > 0
}

func (s vapStep) Validate(ctx context.Context, a *review.Attributes) (*review.Result, error) {
	res, err := s.v.Validate(ctx, a)
	if res == nil {
		return nil, err
	}
	// A refusal keeps the warnings and audit annotations made before it.
	return &review.Result{Warnings: res.Warnings, AuditAnnotations: res.AuditAnnotations}, err
}

// policiesThenWebhooks is the mutating phase as kube runs it: the
// MutatingAdmissionPolicies, then the mutating webhooks (which reinvoke
// each other themselves), then once more the policies that asked for
// reinvocation when a later step changed what they had seen. Webhooks
// are not reinvoked after that second pass of the policies.
type policiesThenWebhooks struct {
	policies *mutating.Mutator
	bindings interface {
		Bindings() ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error)
	}
	webhooks *webhook.Dispatcher
}

// MayMutate says whether a policy binding exists or a webhook's rules
// match writes like a.
func (m policiesThenWebhooks) MayMutate(a *review.Attributes) bool {
	bs, err := m.bindings.Bindings()
	return err != nil || len(bs) > 0 || m.webhooks.MayMutate(a)
}

func (m policiesThenWebhooks) Mutate(ctx context.Context, a *review.Attributes) (*review.Result, error) {
	re := mutating.NewReinvocation()
	obj, err := m.policies.MutateWith(ctx, a, re)
	if err != nil {
		return nil, err
	}
	changed := obj != nil
	if changed {
		a = a.WithObject(obj)
	}
	res, err := m.webhooks.Mutate(ctx, a)
	if err != nil {
		// A refusal keeps the webhooks' warnings and audit annotations.
		return res, err
	}
	if res.Object != nil {
		a = a.WithObject(res.Object)
		changed = true
	}
	if res.Object != nil || re.Changed() {
		obj, err := m.policies.MutateWith(ctx, a, re)
		if err != nil {
			// The policies' refusal keeps the webhooks' warnings and
			// audit annotations, as kube audits the write with them.
			return &review.Result{Warnings: res.Warnings, AuditAnnotations: res.AuditAnnotations}, err
		}
		if obj != nil {
			a = a.WithObject(obj)
			changed = true
		}
	}
	if changed {
		res.Object = a.Object
	}
	return res, nil
}

// regoStep is the operator's Rego policies as a validating step.
type regoStep struct{ p *rego.Policies }

func (r regoStep) MayValidate(a *review.Attributes) bool {
	return r.p.MayValidate(a.Request)
}

func (r regoStep) Validate(ctx context.Context, a *review.Attributes) (*review.Result, error) {
	warnings, err := r.p.Validate(ctx, a)
	return &review.Result{Warnings: warnings}, err
}

// handler serves health and metrics.
func (s *Server) handler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	ping := healthz.Ping()
	natsCheck := healthz.NamedCheck("nats", func(*http.Request) error {
		if !s.nats.IsConnected() {
			return fmt.Errorf("NATS is %v", s.nats.Status())
		}
		return nil
	})
	for endpoint, checks := range map[string][]healthz.Checker{
		"healthz": {ping, healthz.Log(), natsCheck},
		"livez":   {ping, healthz.Log()},
		"readyz":  {ping, healthz.Log(), natsCheck, s.configCheck(), s.shutdown.Check()},
	} {
		h := echo.WrapHandler(healthz.Handler(endpoint, checks...))
		e.GET("/"+endpoint, h)
		e.GET("/"+endpoint+"/*", h)
	}
	e.GET(metrics.Path, echo.WrapHandler(metrics.Handler(s.registry, s.cfg.serving.ClientCA, s.log)))
	if h := s.cfg.serving.InternalProfiles(); h != nil {
		profiling.RegisterEcho(e, h)
	}
	return e
}

// configCheck fails until the configuration has been read: a replica
// that has not read it decides nothing.
func (s *Server) configCheck() healthz.Checker {
	return healthz.NamedCheck("admission-configuration", func(*http.Request) error {
		if !s.synced() {
			return errors.New("webhook configurations and admission policies not yet read")
		}
		return nil
	})
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Run answers reviews and serves until ctx ends, then shuts down in
// order: readiness fails, the reviews delivered finish while NATS sends
// new ones to the other replicas, NATS closes.
func (s *Server) Run(ctx context.Context) error {
	defer s.nats.Close()
	for subject, phase := range map[string]func(context.Context, *admission.Review) (*admission.Verdict, error){
		admission.SubjectMutate:   s.chain.Mutate,
		admission.SubjectValidate: s.chain.Validate,
	} {
		kind := "admit"
		if subject == admission.SubjectValidate {
			kind = "validate"
		}
		if err := s.rpc.Handle(subject, admission.QueueGroup, s.answer(kind, phase)); err != nil {
			return fmt.Errorf("answer %s: %w", subject, err)
		}
	}
	s.log.Info("admitting")
	srcCtx, stopSources := context.WithCancel(context.Background())
	errs := make(chan error, len(s.sources))
	for _, src := range s.sources {
		go func() { errs <- src.Run(srcCtx) }()
	}
	err := serving.Serve(ctx, s.http, s.ln, s.log, s.shutdown.Run)
	// The sources outlive the drain: the reviews that finish during it
	// still read the configuration.
	stopSources()
	for range s.sources {
		if serr := <-errs; serr != nil && err == nil {
			err = fmt.Errorf("follow the admission configuration: %w", serr)
		}
	}
	return errors.Join(err, s.cfg.serving.Tracing.Shutdown(ctx))
}

// answer decodes a review, runs one phase on it and encodes the verdict.
func (s *Server) answer(kind string, phase func(context.Context, *admission.Review) (*admission.Verdict, error)) natsrpc.Handler {
	return func(ctx context.Context, payload []byte) ([]byte, error) {
		start := time.Now()
		var r admission.Review
		if err := json.Unmarshal(payload, &r); err != nil {
			return nil, fmt.Errorf("decode admission review: %w", err)
		}
		v, err := phase(ctx, &r)
		if err != nil {
			return nil, err
		}
		s.steps.WithLabelValues(kind, string(r.Request.Operation), fmt.Sprint(!v.Allowed)).Observe(time.Since(start).Seconds())
		return json.Marshal(v)
	}
}

// drain lets the reviews delivered before shutdown finish.
func (s *Server) drain(ctx context.Context) {
	if err := s.rpc.Drain(ctx); err != nil {
		s.log.Warn("drain reviews", "err", err)
	}
}
