package validating

import (
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/object"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	"kplane.dev/services/admission/internal/review"
)

// matchPolicy matches a policy's matchConstraints, which it must have,
// and returns what its rules matched the write as: its own resource and
// kind, or an equivalent one's under matchPolicy Equivalent.
func (e *evaluation) matchPolicy(ctx context.Context, p *admissionregistrationv1.ValidatingAdmissionPolicy) (bool, review.Target, error) {
	if p.Spec.MatchConstraints == nil {
		return false, review.Target{}, errors.New("policy contained no match constraints, a required field")
	}
	return e.match(ctx, p.Spec.MatchConstraints)
}

// matchBinding matches a binding's matchResources; a binding without
// them matches whatever its policy matches.
func (e *evaluation) matchBinding(ctx context.Context, b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (bool, error) {
	if b.Spec.MatchResources == nil {
		return true, nil
	}
	ok, _, err := e.match(ctx, b.Spec.MatchResources)
	return ok, err
}

// match is kube's matching.Matcher.Matches: the selectors first, whose
// errors count only when the rules match, then the excluded rules, then
// the rules (none match everything), each under the matchPolicy. A nil
// selector, which the API server defaults to {} before storing a policy,
// selects everything.
func (e *evaluation) match(ctx context.Context, mr *admissionregistrationv1.MatchResources) (bool, review.Target, error) {
	none := review.Target{}
	nsMatch, nsErr := e.matchNamespace(ctx, mr.NamespaceSelector)
	if !nsMatch && nsErr == nil {
		return false, none, nil
	}
	objMatch, objErr := (&object.Matcher{}).MatchObjectSelector(objectSelector{mr.ObjectSelector}, e.va.Attributes)
	if !objMatch && objErr == nil {
		return false, none, nil
	}
	equivalent := review.Equivalent(mr.MatchPolicy)
	if _, ok := e.matchRules(mr.ExcludeResourceRules, equivalent); ok {
		return false, none, nil
	}
	target := e.a.Own()
	if len(mr.ResourceRules) > 0 {
		var ok bool
		if target, ok = e.matchRules(mr.ResourceRules, equivalent); !ok {
			return false, none, nil
		}
	}
	if nsErr != nil {
		return false, none, nsErr
	}
	if objErr != nil {
		return false, none, objErr
	}
	return true, target, nil
}

// matchRules finds what named rules match the write as, resourceNames
// included.
func (e *evaluation) matchRules(named []admissionregistrationv1.NamedRuleWithOperations, equivalent bool) (review.Target, bool) {
	return e.a.Match(len(named), equivalent, func(i int, res schema.GroupVersionResource) bool {
		nr := named[i]
		m := rules.Matcher{Rule: admissionregistrationv1.RuleWithOperations(nr.RuleWithOperations), Attr: review.WithResource(e.va.Attributes, res)}
		if !m.Matches() {
			return false
		}
		if len(nr.ResourceNames) == 0 {
			return true
		}
		for _, name := range nr.ResourceNames {
			if name == e.a.Request.Name {
				return true
			}
		}
		return false
	})
}

// objectSelector is a selector as kube's object matcher reads it.
type objectSelector struct{ s *metav1.LabelSelector }

func (o objectSelector) GetParsedObjectSelector() (labels.Selector, error) {
	return review.Selector(o.s)
}

// matchNamespace matches s as kube's namespace matcher does, reading
// the namespace once however many policies ask.
func (e *evaluation) matchNamespace(ctx context.Context, s *metav1.LabelSelector) (bool, *apierrors.StatusError) {
	return review.MatchNamespace(ctx, func(ctx context.Context, name string) (*corev1.Namespace, error) {
		return e.namespaces.get(ctx, e.v.cfg.Namespaces, name)
	}, e.a, s)
}

// namespaceCache reads the write's namespace once however many policies
// ask for it.
type namespaceCache struct {
	name string
	ns   *corev1.Namespace
	err  error
}

func (c *namespaceCache) get(ctx context.Context, namespaces Namespaces, name string) (*corev1.Namespace, error) {
	if c.name == name && (c.ns != nil || c.err != nil) {
		return c.ns, c.err
	}
	ns, err := namespaces.Get(ctx, name)
	if err != nil && !apierrors.IsNotFound(err) {
		// Not kept: a passing failure fails only this lookup.
		return nil, fmt.Errorf("read namespace %q: %w", name, err)
	}
	c.name, c.ns, c.err = name, ns, err
	return ns, err
}
