package mutating

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"kplane.dev/services/admission/internal/review"
)

// dispatch applies the invocations in order, as kube's mutating
// dispatcher does: each policy's match conditions, then its mutations in
// order, each seeing the object as the one before left it. It returns
// the changed object (nil when unchanged), the invocations that failed,
// and a status error that ends the write regardless of failure policies.
func (m *Mutator) dispatch(ctx context.Context, a *review.Attributes, va *admission.VersionedAttributes,
	invs []invocation, r *Reinvocation, reinvoke bool,
) (*unstructured.Unstructured, []policyError, error) {
	ns, err := m.namespace(ctx, a)
	if err != nil {
		return nil, nil, err
	}
	var errs []policyError
	// va is the write as the invocations so far left it, in the kind the
	// last of them saw.
	for _, inv := range invs {
		if va, err = m.seenAs(a, va, inv.target); err != nil {
			return nil, nil, err
		}
		ictx := ctx
		if inv.compiled.compiler != nil {
			ictx = inv.compiled.compiler.CreateContext(ctx)
		}
		if inv.compiled.matcher != nil {
			res := inv.compiled.matcher.Match(ictx, va, inv.param, m.cfg.Authorizer)
			if res.Error != nil {
				errs = append(errs, policyError{policy: inv.policy, binding: inv.binding, err: res.Error, reason: metav1.StatusReasonInvalid})
				continue
			}
			if !res.Matches {
				continue
			}
		}
		key, err := keyFor(inv)
		if err != nil {
			return nil, nil, apierrors.NewInternalError(err)
		}
		if reinvoke && !r.reinvoke.Has(key) {
			continue
		}
		before := va.VersionedObject.Object()
		for i := range inv.policy.Spec.Mutations {
			if va.VersionedObject.Object() == nil {
				continue // nothing to mutate: a delete
			}
			vars := plugincel.OptionalVariableBindings{VersionedParams: inv.param, Authorizer: m.cfg.Authorizer}
			if err := m.patch(ictx, inv.compiled.patchers[i], va, ns, vars); err != nil {
				var statusErr *apierrors.StatusError
				if errors.As(err, &statusErr) {
					return nil, nil, statusErr
				}
				errs = append(errs, policyError{policy: inv.policy, binding: inv.binding, err: err, reason: metav1.StatusReasonInvalid})
				continue
			}
		}
		if !apiequality.Semantic.DeepEqual(before, va.VersionedObject.Object()) {
			// Invocations before this one did not see its change.
			r.requireReinvocation()
			r.changed = true
		}
		if inv.policy.Spec.ReinvocationPolicy == admissionregistrationv1.IfNeededReinvocationPolicy {
			r.invoked.Insert(key)
		}
	}
	if !va.Dirty || va.VersionedObject.Object() == nil {
		return nil, errs, nil
	}
	out, err := toUnstructured(va.VersionedObject.Object())
	if err != nil {
		return nil, nil, apierrors.NewInternalError(err)
	}
	if out, err = a.ConvertTo(out, schema.GroupVersionKind(a.Request.Kind)); err != nil {
		return nil, nil, err
	}
	if apiequality.Semantic.DeepEqual(out, a.Object) {
		return nil, errs, nil
	}
	return out, errs, nil
}

// seenAs returns the write as an invocation that matched it as t sees
// it, from va, the write as the invocations before left it: converted to
// t's kind when va's is another.
func (m *Mutator) seenAs(a *review.Attributes, va *admission.VersionedAttributes, t review.Target) (*admission.VersionedAttributes, error) {
	if va.VersionedKind == t.Kind {
		return va, nil
	}
	cur := a
	if obj := va.VersionedObject.Object(); obj != nil {
		u, err := toUnstructured(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if u, err = a.ConvertTo(u, schema.GroupVersionKind(a.Request.Kind)); err != nil {
			return nil, err
		}
		cur = a.WithObject(u)
	}
	seen, err := cur.As(t)
	if err != nil {
		return nil, err
	}
	out, err := seen.Versioned()
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	out.Dirty = va.Dirty
	return out, nil
}

// namespace reads the namespace of a namespaced write, which expressions
// see as namespaceObject. As in kube, a missing namespace ends the write.
func (m *Mutator) namespace(ctx context.Context, a *review.Attributes) (*corev1.Namespace, error) {
	name := a.Request.Namespace
	// kube gives a namespace's own write its name as namespace, and
	// unsets it here.
	if k := a.Request.Kind; k.Group == "" && k.Version == "v1" && k.Kind == "Namespace" {
		name = ""
	}
	if name == "" {
		return nil, nil
	}
	ns, err := m.cfg.Namespaces.Get(ctx, name)
	if err != nil {
		var statusErr *apierrors.StatusError
		if errors.As(err, &statusErr) {
			return nil, statusErr
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	return ns, nil
}

// patch applies one mutation to va's object, as kube's dispatchOne does.
func (m *Mutator) patch(ctx context.Context, p patch.Patcher, va *admission.VersionedAttributes, ns *corev1.Namespace, vars plugincel.OptionalVariableBindings) error {
	if p == nil {
		return apierrors.NewInternalError(errors.New("policy evaluator is nil"))
	}
	tc, err := m.types.forKind(va.VersionedKind)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("Resource kind %s not found. There can be a delay between when CustomResourceDefinitions are created and when they are available.", va.VersionedKind))
	}
	obj, err := p.Patch(ctx, patch.Request{
		MatchedResource:     va.GetResource(),
		VersionedAttributes: va,
		ObjectInterfaces:    unstructuredObjects{},
		OptionalVariables:   vars,
		Namespace:           ns,
		TypeConverter:       tc,
	}, celconfig.RuntimeCELCostBudget)
	if err != nil {
		return err
	}
	u, err := toUnstructured(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	va.UpdateObject(u)
	return nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert the mutated %T to unstructured: %w", obj, err)
	}
	return &unstructured.Unstructured{Object: content}, nil
}

func keyFor(inv invocation) (invocationKey, error) {
	k := invocationKey{policy: inv.policy.Name, binding: inv.binding.Name}
	if inv.param != nil {
		pm, err := meta.Accessor(inv.param)
		if err != nil {
			return invocationKey{}, fmt.Errorf("read the param of binding %q: %w", inv.binding.Name, err)
		}
		k.param = types.NamespacedName{Namespace: pm.GetNamespace(), Name: pm.GetName()}
	}
	return k, nil
}
