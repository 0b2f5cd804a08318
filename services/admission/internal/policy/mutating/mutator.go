package mutating

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"kplane.dev/services/admission/internal/review"
)

// Policies are the mutating admission policies and bindings in force,
// usually informers' listers.
type Policies interface {
	Policies() ([]*admissionregistrationv1.MutatingAdmissionPolicy, error)
	Bindings() ([]*admissionregistrationv1.MutatingAdmissionPolicyBinding, error)
}

// Namespaces gives the namespace of a namespaced write, whose labels a
// namespaceSelector matches and which expressions read as
// namespaceObject. A missing namespace is an apierrors NotFound.
type Namespaces interface {
	Get(ctx context.Context, name string) (*corev1.Namespace, error)
}

// Params reads the objects a binding's paramRef names. namespace is the
// one kube reads a namespaced param kind from: the paramRef's namespace,
// else the write's; an implementation for a cluster-scoped kind ignores
// it. A missing object is an apierrors NotFound from Get and no item from
// List.
type Params interface {
	Get(ctx context.Context, kind schema.GroupVersionKind, namespace, name string) (runtime.Object, error)
	List(ctx context.Context, kind schema.GroupVersionKind, namespace string, selector labels.Selector) ([]runtime.Object, error)
}

// ParamScopes may be implemented by a Params to say whether a param kind
// is namespaced. With it the Mutator refuses, as kube does, a paramRef
// whose namespace does not fit the kind's scope; without it the
// namespace is passed on as described at Params.
type ParamScopes interface {
	Namespaced(ctx context.Context, kind schema.GroupVersionKind) (bool, error)
}

// Config is what a Mutator needs.
type Config struct {
	Policies   Policies
	Namespaces Namespaces
	// Params is needed only by policies with a paramKind; without it
	// their bindings fail as bindings of an unknown param kind.
	Params Params
	// Logger records the policies that failed open; slog.Default when nil.
	Logger *slog.Logger
	// Authorizer answers the authorizer variable of expressions; without
	// it an expression that reads the variable fails.
	Authorizer authorizer.UnconditionalAuthorizer
}

// Mutator applies the mutating admission policies that match a write. It
// is safe for concurrent use.
type Mutator struct {
	cfg      Config
	compiled *compiledPolicies
	types    *typeConverters
}

// New makes a Mutator.
func New(cfg Config) (*Mutator, error) {
	if cfg.Policies == nil {
		return nil, errors.New("mutating admission policies: no Policies")
	}
	if cfg.Namespaces == nil {
		return nil, errors.New("mutating admission policies: no Namespaces")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Mutator{cfg: cfg, compiled: newCompiledPolicies(), types: newTypeConverters()}, nil
}

// Mutate returns the object after every matching policy (nil when
// unchanged); a refusal or failure is an *apierrors.StatusError as kube
// returns it. It runs the policies once; a mutating phase that reinvokes
// them uses MutateWith.
func (m *Mutator) Mutate(ctx context.Context, a *review.Attributes) (*unstructured.Unstructured, error) {
	return m.MutateWith(ctx, a, NewReinvocation())
}

// MutateWith is Mutate for one pass of a mutating phase that may run its
// steps twice, as kube-apiserver's does: r carries from the first pass to
// the second which policies ran and what they left.
//
// The first call with r runs every matching policy. When any policy
// changed the object, r.Changed is true and kube runs the whole mutating
// phase once more. The second call with r, given the write as the later
// steps left it, reruns only the policies with reinvocationPolicy
// IfNeeded that ran before an object change they did not see: a later
// policy's, or the later steps' (when the object differs from what the
// first pass returned). There is no third pass.
func (m *Mutator) MutateWith(ctx context.Context, a *review.Attributes, r *Reinvocation) (*unstructured.Unstructured, error) {
	if r.passes >= 2 {
		return nil, apierrors.NewInternalError(errors.New("mutating admission policies ran twice already for this write"))
	}
	reinvoke := r.passes == 1
	r.passes++
	r.changed = false
	if reinvoke && !apiequality.Semantic.DeepEqual(r.lastOutput, a.Object) {
		r.requireReinvocation()
	}
	obj, err := m.run(ctx, a, r, reinvoke)
	if err != nil {
		return nil, err
	}
	out := a.Object
	if obj != nil {
		out = obj
	}
	r.lastOutput = out.DeepCopy()
	return obj, nil
}

// invocation is one policy applied through one binding with one param.
type invocation struct {
	policy   *admissionregistrationv1.MutatingAdmissionPolicy
	binding  *admissionregistrationv1.MutatingAdmissionPolicyBinding
	param    runtime.Object
	compiled *compiledPolicy
	// target is what the policy's rules matched the write as.
	target review.Target
}

// policyError is a policy or binding that could not be applied, kube's
// generic.PolicyError.
type policyError struct {
	policy  *admissionregistrationv1.MutatingAdmissionPolicy
	binding *admissionregistrationv1.MutatingAdmissionPolicyBinding
	err     error
	reason  metav1.StatusReason
}

func (e policyError) Error() string {
	if e.binding != nil {
		return fmt.Sprintf("policy '%s' with binding '%s' denied request: %s", e.policy.Name, e.binding.Name, e.err.Error())
	}
	return fmt.Sprintf("policy %q denied request: %s", e.policy.Name, e.err.Error())
}

func (m *Mutator) run(ctx context.Context, a *review.Attributes, r *Reinvocation, reinvoke bool) (*unstructured.Unstructured, error) {
	va, err := a.Versioned()
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	// Writes to admission configurations never meet policies, so that
	// a broken policy cannot prevent its own repair.
	if rules.IsExemptAdmissionConfigurationResource(va.Attributes) {
		return nil, nil
	}
	policies, err := m.cfg.Policies.Policies()
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("list mutating admission policies: %w", err))
	}
	bindings, err := m.cfg.Policies.Bindings()
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("list mutating admission policy bindings: %w", err))
	}
	m.compiled.prune(policies)
	if len(policies) == 0 || len(bindings) == 0 {
		return nil, nil
	}
	invocations, errs := m.invocations(ctx, a, va, sortedPolicies(policies), bindingsByPolicy(bindings))
	var obj *unstructured.Unstructured
	if len(invocations) > 0 {
		var statusErr error
		var more []policyError
		obj, more, statusErr = m.dispatch(ctx, a, va, invocations, r, reinvoke)
		if statusErr != nil {
			return nil, statusErr
		}
		errs = append(errs, more...)
	}
	if err := m.refusal(va, errs); err != nil {
		return nil, err
	}
	return obj, nil
}

// invocations matches each policy, then each of its bindings, and
// collects the params of each binding that matches, as kube's policy
// dispatcher does.
func (m *Mutator) invocations(ctx context.Context, a *review.Attributes, va *admission.VersionedAttributes,
	policies []*admissionregistrationv1.MutatingAdmissionPolicy,
	bindings map[string][]*admissionregistrationv1.MutatingAdmissionPolicyBinding,
) ([]invocation, []policyError) {
	var invs []invocation
	var errs []policyError
	for _, p := range policies {
		pbs := bindings[p.Name]
		if len(pbs) == 0 {
			continue
		}
		if p.Spec.MatchConstraints == nil {
			errs = append(errs, policyError{policy: p, err: errors.New("policy contained no match constraints, a required field")})
			continue
		}
		target, ok, err := m.matchResources(ctx, a, va, p.Spec.MatchConstraints)
		if err != nil {
			errs = append(errs, policyError{policy: p, err: err})
			continue
		}
		if !ok {
			continue
		}
		compiled := m.compiled.get(p)
		if compiled.err != nil {
			errs = append(errs, policyError{policy: p, err: compiled.err})
			continue
		}
		for _, b := range pbs {
			if b.Spec.MatchResources != nil {
				_, ok, err := m.matchResources(ctx, a, va, b.Spec.MatchResources)
				if err != nil {
					errs = append(errs, policyError{policy: p, binding: b, err: err})
					continue
				}
				if !ok {
					continue
				}
			}
			params, err := m.params(ctx, p.Spec.ParamKind, b.Spec.ParamRef, a.Request.Namespace)
			if err != nil {
				errs = append(errs, policyError{policy: p, binding: b, err: err})
				continue
			}
			for _, param := range params {
				invs = append(invs, invocation{policy: p, binding: b, param: param, compiled: compiled, target: target})
			}
		}
	}
	return invs, errs
}

// refusal applies each failed policy's failurePolicy and turns what is
// left into kube's refusal: a Forbidden whose message is the first
// failure and whose causes are all of them.
func (m *Mutator) refusal(va *admission.VersionedAttributes, errs []policyError) error {
	var failed []policyError
	for _, e := range errs {
		if fp := e.policy.Spec.FailurePolicy; fp != nil && *fp == admissionregistrationv1.Ignore {
			m.cfg.Logger.Warn("mutating admission policy failed open",
				"policy", e.policy.Name, "binding", bindingName(e.binding), "error", e.err.Error())
			continue
		}
		failed = append(failed, e)
	}
	if len(failed) == 0 {
		return nil
	}
	var statusErr *apierrors.StatusError
	if !errors.As(admission.NewForbidden(va.Attributes, errors.New("admission request denied by policy")), &statusErr) {
		return apierrors.NewInternalError(errors.New("failed to create status error"))
	}
	statusErr.ErrStatus.Message = ""
	for _, e := range failed {
		msg := e.Error()
		if statusErr.ErrStatus.Message == "" {
			statusErr.ErrStatus.Message = msg
			if e.reason != "" {
				statusErr.ErrStatus.Reason = e.reason
			}
		}
		statusErr.ErrStatus.Details.Causes = append(statusErr.ErrStatus.Details.Causes, metav1.StatusCause{Message: msg})
	}
	return statusErr
}

func bindingName(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string {
	if b == nil {
		return ""
	}
	return b.Name
}

// sortedPolicies orders policies by name. Kube applies them in its
// informer's order, which no client can rely on; a fixed order makes a
// write's outcome repeatable.
func sortedPolicies(ps []*admissionregistrationv1.MutatingAdmissionPolicy) []*admissionregistrationv1.MutatingAdmissionPolicy {
	ps = slices.Clone(ps)
	slices.SortFunc(ps, func(a, b *admissionregistrationv1.MutatingAdmissionPolicy) int { return cmp.Compare(a.Name, b.Name) })
	return ps
}

// bindingsByPolicy groups bindings by the policy they name, each group
// ordered by name.
func bindingsByPolicy(bs []*admissionregistrationv1.MutatingAdmissionPolicyBinding) map[string][]*admissionregistrationv1.MutatingAdmissionPolicyBinding {
	by := map[string][]*admissionregistrationv1.MutatingAdmissionPolicyBinding{}
	for _, b := range bs {
		by[b.Spec.PolicyName] = append(by[b.Spec.PolicyName], b)
	}
	for _, group := range by {
		slices.SortFunc(group, func(a, b *admissionregistrationv1.MutatingAdmissionPolicyBinding) int {
			return cmp.Compare(a.Name, b.Name)
		})
	}
	return by
}
