package validating

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"kplane.dev/services/admission/internal/review"
)

// Policies are the policies and bindings in force, usually informers'
// listers.
type Policies interface {
	Policies() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, error)
	Bindings() ([]*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error)
}

// Namespaces gives the namespace of a namespaced write, whose labels a
// namespaceSelector matches and which expressions read as
// namespaceObject. A missing namespace is an apierrors NotFound.
type Namespaces interface {
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Params gives the objects a binding's paramRef names or selects.
// Every method returns an error wrapping ErrKindUnknown when the API
// server does not serve kind, and Get and List one wrapping ErrNotSynced
// when the objects of kind cannot be read yet.
type Params interface {
	// Namespaced says whether objects of kind live in namespaces.
	Namespaced(ctx context.Context, kind schema.GroupVersionKind) (bool, error)
	// Get returns the object of kind named name in namespace (empty for
	// a cluster-scoped kind); a missing one is an apierrors NotFound.
	Get(ctx context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error)
	// List returns the objects of kind in namespace (empty for a
	// cluster-scoped kind) that selector selects.
	List(ctx context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error)
}

var (
	// ErrKindUnknown is the error Params wrap when the API server does
	// not serve a paramKind.
	ErrKindUnknown = errors.New("kind not known")
	// ErrNotSynced is the error Params wrap when the objects of a
	// paramKind cannot be read yet.
	ErrNotSynced = errors.New("kind not yet synced")
)

// Config is what a Validator needs.
type Config struct {
	Policies   Policies
	Namespaces Namespaces
	// Params is needed only by policies with a paramKind; without it
	// their bindings fail as kube's do when the kind is not known.
	Params Params
	// Registerer takes the Validator's metrics; none are registered when
	// nil.
	Registerer prometheus.Registerer
	// Logger records failures that a failurePolicy of Ignore let
	// through; slog.Default when nil.
	Logger *slog.Logger
	// Authorizer answers the authorizer variable of expressions; without
	// it an expression that reads the variable fails.
	Authorizer authorizer.UnconditionalAuthorizer
}

// Result is what the policies added to a write.
type Result struct {
	Warnings         []string
	AuditAnnotations map[string]string
}

// Validator evaluates the policies that match a write. It is safe for
// concurrent use.
type Validator struct {
	cfg      Config
	compiled *cache
	metrics  *metrics
}

// New makes a Validator.
func New(cfg Config) (*Validator, error) {
	if cfg.Policies == nil {
		return nil, errors.New("validating admission policy: no Policies")
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("validating admission policy: no Namespaces")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Validator{cfg: cfg, compiled: newCache(), metrics: m}, nil
}

// hook is a policy with the bindings that name it.
type hook struct {
	policy   *admissionregistrationv1.ValidatingAdmissionPolicy
	bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// hooks pairs the policies with their bindings, as kube's policy source
// does: a policy without a binding does nothing, and a binding naming a
// missing policy is skipped. Kube's order comes from a map; this one is
// by name, so that the refusal reported among several is always the
// same.
func (v *Validator) hooks() ([]hook, error) {
	policies, err := v.cfg.Policies.Policies()
	if err != nil {
		return nil, fmt.Errorf("list validating admission policies: %w", err)
	}
	bindings, err := v.cfg.Policies.Bindings()
	if err != nil {
		return nil, fmt.Errorf("list validating admission policy bindings: %w", err)
	}
	byName := map[string][]*admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	for _, b := range bindings {
		byName[b.Spec.PolicyName] = append(byName[b.Spec.PolicyName], b)
	}
	live := make(map[types.UID]bool, len(policies))
	var hooks []hook
	for _, p := range policies {
		live[p.UID] = true
		bs := byName[p.Name]
		if len(bs) == 0 {
			continue
		}
		sort.Slice(bs, func(i, j int) bool { return bs[i].Name < bs[j].Name })
		hooks = append(hooks, hook{policy: p, bindings: bs})
	}
	v.compiled.prune(live)
	sort.Slice(hooks, func(i, j int) bool { return hooks[i].policy.Name < hooks[j].policy.Name })
	return hooks, nil
}

// Validate evaluates the policies bound to a. A refusal is an
// *apierrors.StatusError as kube's; it comes with the Result, whose
// warnings and audit annotations kube records for a refused write too.
// Other errors mean the write could not be decided and come alone.
func (v *Validator) Validate(ctx context.Context, a *review.Attributes) (*Result, error) {
	if exempt(a) {
		return &Result{}, nil
	}
	hooks, err := v.hooks()
	if err != nil {
		return nil, err
	}
	if len(hooks) == 0 {
		return &Result{}, nil
	}
	va, err := a.Versioned()
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("prepare the request for validating admission policies: %w", err))
	}
	e := &evaluation{v: v, a: a, va: va}
	for _, h := range hooks {
		if err := e.policy(ctx, h); err != nil {
			return nil, err
		}
	}
	return e.finish()
}

// exempt says whether a is a write to a policy or binding, which kube
// evaluates no policy stored in the API for, so that a broken policy
// cannot prevent its own repair.
func exempt(a *review.Attributes) bool {
	r := a.Request.Resource
	if r.Group != admissionregistrationv1.GroupName {
		return false
	}
	switch r.Resource {
	case "validatingadmissionpolicies", "validatingadmissionpolicybindings",
		"mutatingadmissionpolicies", "mutatingadmissionpolicybindings":
		return true
	}
	return false
}
