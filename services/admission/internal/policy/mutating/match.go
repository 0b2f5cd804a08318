package mutating

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"

	"kplane.dev/services/admission/internal/review"
)

// matchResources says whether a write falls under a policy's
// matchConstraints or a binding's matchResources, in kube's order: the
// selectors first, but their errors count only when the rules match, so
// that a missing namespace fails no write the policy would not touch.
func (m *Mutator) matchResources(ctx context.Context, a *review.Attributes, va *admission.VersionedAttributes, mr *admissionregistrationv1.MatchResources) (bool, error) {
	nsMatch, nsErr := m.matchNamespace(ctx, a, mr.NamespaceSelector)
	if !nsMatch && nsErr == nil {
		return false, nil
	}
	objMatch, objErr := matchObject(a, mr.ObjectSelector)
	if !objMatch && objErr == nil {
		return false, nil
	}
	if matchRules(mr.ExcludeResourceRules, va) {
		return false, nil
	}
	if len(mr.ResourceRules) > 0 && !matchRules(mr.ResourceRules, va) {
		return false, nil
	}
	if nsErr != nil {
		return false, nsErr
	}
	if objErr != nil {
		return false, objErr
	}
	return true, nil
}

// matchRules is kube's rule match (operations, groups, versions,
// resources and subresources, scope) plus resourceNames.
func matchRules(named []admissionregistrationv1.NamedRuleWithOperations, va *admission.VersionedAttributes) bool {
	for _, r := range named {
		if !(&rules.Matcher{Rule: r.RuleWithOperations, Attr: va.Attributes}).Matches() {
			continue
		}
		if len(r.ResourceNames) == 0 {
			return true
		}
		for _, name := range r.ResourceNames {
			if name == va.GetName() {
				return true
			}
		}
	}
	return false
}

// selector parses s; a nil selector, which the API server defaults to {}
// before a policy or binding is stored, selects everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func (m *Mutator) matchNamespace(ctx context.Context, a *review.Attributes, s *metav1.LabelSelector) (bool, error) {
	r := a.Request
	if r.Namespace == "" && r.Resource.Resource != "namespaces" {
		return true, nil
	}
	sel, err := selector(s)
	if err != nil {
		return false, apierrors.NewInternalError(err)
	}
	if sel.Empty() {
		return true, nil
	}
	// A namespace being created or updated is matched on its own new
	// labels.
	if r.Resource.Resource == "namespaces" && r.SubResource == "" &&
		(r.Operation == admissionv1.Create || r.Operation == admissionv1.Update) && a.Object != nil {
		return sel.Matches(labels.Set(a.Object.GetLabels())), nil
	}
	name := r.Namespace
	if r.Resource.Resource == "namespaces" {
		// A namespace's own write carries its name, not a namespace.
		name = r.Name
	}
	ns, err := m.cfg.Namespaces.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		if status, ok := err.(apierrors.APIStatus); ok {
			return false, &apierrors.StatusError{ErrStatus: status.Status()}
		}
		return false, apierrors.NewInternalError(err)
	}
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("read namespace %q: %w", name, err))
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// matchObject matches the new object's labels or the old one's, as kube
// does.
func matchObject(a *review.Attributes, s *metav1.LabelSelector) (bool, error) {
	sel, err := selector(s)
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
