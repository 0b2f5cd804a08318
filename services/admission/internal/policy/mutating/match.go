package mutating

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	"kplane.dev/services/admission/internal/review"
)

// matchResources says whether a write falls under a policy's
// matchConstraints or a binding's matchResources, and what their rules
// matched it as (its own resource, or an equivalent one under matchPolicy
// Equivalent), in kube's order: the selectors first, but their errors
// count only when the rules match, so that a missing namespace fails no
// write the policy would not touch.
func (m *Mutator) matchResources(ctx context.Context, a *review.Attributes, va *admission.VersionedAttributes, mr *admissionregistrationv1.MatchResources) (review.Target, bool, error) {
	none := review.Target{}
	nsMatch, nsErr := m.matchNamespace(ctx, a, mr.NamespaceSelector)
	if !nsMatch && nsErr == nil {
		return none, false, nil
	}
	objMatch, objErr := matchObject(a, mr.ObjectSelector)
	if !objMatch && objErr == nil {
		return none, false, nil
	}
	equivalent := review.Equivalent(mr.MatchPolicy)
	if _, ok := matchRules(mr.ExcludeResourceRules, equivalent, a, va); ok {
		return none, false, nil
	}
	target := a.Own()
	if len(mr.ResourceRules) > 0 {
		var ok bool
		if target, ok = matchRules(mr.ResourceRules, equivalent, a, va); !ok {
			return none, false, nil
		}
	}
	if nsErr != nil {
		return none, false, nsErr
	}
	if objErr != nil {
		return none, false, objErr
	}
	return target, true, nil
}

// matchRules finds what named rules match the write as: kube's rule match
// (operations, groups, versions, resources and subresources, scope) plus
// resourceNames.
func matchRules(named []admissionregistrationv1.NamedRuleWithOperations, equivalent bool, a *review.Attributes, va *admission.VersionedAttributes) (review.Target, bool) {
	return a.Match(len(named), equivalent, func(i int, res schema.GroupVersionResource) bool {
		r := named[i]
		if !(&rules.Matcher{Rule: r.RuleWithOperations, Attr: review.WithResource(va.Attributes, res)}).Matches() {
			return false
		}
		if len(r.ResourceNames) == 0 {
			return true
		}
		for _, name := range r.ResourceNames {
			if name == va.GetName() {
				return true
			}
		}
		return false
	})
}

func (m *Mutator) matchNamespace(ctx context.Context, a *review.Attributes, s *metav1.LabelSelector) (bool, error) {
	ok, err := review.MatchNamespace(ctx, m.cfg.Namespaces.Get, a, s)
	if err != nil {
		return false, err
	}
	return ok, nil
}

// matchObject matches the new object's labels or the old one's, as kube
// does.
func matchObject(a *review.Attributes, s *metav1.LabelSelector) (bool, error) {
	sel, err := review.Selector(s)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if sel.Empty() {
		return true, nil
	}
	if a.Object != nil && sel.Matches(labels.Set(a.Object.GetLabels())) {
		return true, nil
	}
	return a.OldObject != nil && sel.Matches(labels.Set(a.OldObject.GetLabels())), nil
}
