package webhook

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"kplane.dev/services/admission/internal/review"
)

var namespacesResource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// exempt says whether a write is to a webhook or policy configuration,
// which kube never sends to webhooks so that a broken webhook cannot
// prevent its own repair.
func exempt(a *review.Attributes) bool {
	k := a.Request.Kind
	if k.Group != admissionregistrationv1.GroupName {
		return false
	}
	switch k.Kind {
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
		"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
		"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding":
		return true
	}
	return false
}

// matches returns a as h is to be called with, nil when h is not to be
// called for a: a itself, or a converted to the equivalent resource h's
// rules match under matchPolicy Equivalent. Kube's order: the selectors
// first, but their errors count only for a webhook whose rules match, so
// that a missing namespace fails no write a webhook would not see
// anyway; the matchConditions last, on the write as h sees it.
func (d *Dispatcher) matches(ctx context.Context, h *hook, a *review.Attributes) (*review.Attributes, error) {
	nsMatch, nsErr := d.matchNamespace(ctx, h, a)
	if !nsMatch && nsErr == nil {
		return nil, nil
	}
	objMatch, objErr := matchObject(h, a)
	if !objMatch && objErr == nil {
		return nil, nil
	}
	target, ok := matchRules(h, a)
	if !ok {
		return nil, nil
	}
	if nsErr != nil {
		return nil, nsErr
	}
	if objErr != nil {
		return nil, objErr
	}
	seen, err := a.As(target)
	if err != nil {
		return nil, err
	}
	ok, err = d.matchConditions(ctx, h, seen)
	if !ok || err != nil {
		return nil, err
	}
	return seen, nil
}

// selector parses s; a nil selector, which the API server defaults to {}
// before a configuration is stored, selects everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func (d *Dispatcher) matchNamespace(ctx context.Context, h *hook, a *review.Attributes) (bool, error) {
	r := a.Request
	if r.Namespace == "" && r.Resource.Resource != namespacesResource.Resource {
		return true, nil
	}
	sel, err := selector(h.namespaceSelector)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("parsing the namespaceSelector of webhook %q: %w", h.name, err))
	}
	if sel.Empty() {
		return true, nil
	}
	// A namespace being created or updated is matched on its own new
	// labels: it has no stored labels yet, or they are about to change.
	if r.Resource.Resource == namespacesResource.Resource && r.SubResource == "" &&
		(r.Operation == admissionv1.Create || r.Operation == admissionv1.Update) && a.Object != nil {
		return sel.Matches(labels.Set(a.Object.GetLabels())), nil
	}
	name := r.Namespace
	if r.Resource.Resource == namespacesResource.Resource {
		// A namespace's own namespace is empty in a request: its name is
		// the namespace.
		name = r.Name
	}
	ns, err := d.cfg.Namespaces.Get(ctx, name)
	if apierrors.IsNotFound(err) {
		if status, ok := err.(apierrors.APIStatus); ok {
			return false, &apierrors.StatusError{ErrStatus: status.Status()}
		}
		return false, apierrors.NewInternalError(err)
	}
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("getting namespace %q for the namespaceSelector of webhook %q: %w", name, h.name, err))
	}
	return sel.Matches(labels.Set(ns.Labels)), nil
}

// matchObject matches the new object's labels or the old one's, so that a
// webhook sees both the write that gives an object its labels and the one
// that takes them away.
func matchObject(h *hook, a *review.Attributes) (bool, error) {
	sel, err := selector(h.objectSelector)
	if err != nil {
		return false, apierrors.NewInternalError(fmt.Errorf("parsing the objectSelector of webhook %q: %w", h.name, err))
	}
	if sel.Empty() {
		return true, nil
	}
	if a.Object != nil && sel.Matches(labels.Set(a.Object.GetLabels())) {
		return true, nil
	}
	return a.OldObject != nil && sel.Matches(labels.Set(a.OldObject.GetLabels())), nil
}

// MayMutate says whether a mutating webhook's rules match writes like
// a; its selectors and conditions, which read the object, are not asked.
func (d *Dispatcher) MayMutate(a *review.Attributes) bool {
	hs, err := d.mutatingHooks()
	return err != nil || mayMatch(hs, a)
}

// MayValidate says whether a validating webhook's rules match writes
// like a.
func (d *Dispatcher) MayValidate(a *review.Attributes) bool {
	hs, err := d.validatingHooks()
	return err != nil || mayMatch(hs, a)
}

func mayMatch(hs []*hook, a *review.Attributes) bool {
	if exempt(a) {
		return false
	}
	for _, h := range hs {
		if _, ok := matchRules(h, a); ok {
			return true
		}
	}
	return false
}

// matchRules finds what h's rules match a as: its own resource, or an
// equivalent one under matchPolicy Equivalent.
func matchRules(h *hook, a *review.Attributes) (review.Target, bool) {
	return a.Match(len(h.rules), review.Equivalent(h.matchPolicy), func(i int, res schema.GroupVersionResource) bool {
		return matchRule(h.rules[i], res, a.Request)
	})
}

// matchRule matches r as a write to res.
func matchRule(rule admissionregistrationv1.RuleWithOperations, res schema.GroupVersionResource, r *admissionv1.AdmissionRequest) bool {
	return matchScope(rule.Scope, r) &&
		matchOperation(rule.Operations, r.Operation) &&
		exactOrWildcard(rule.APIGroups, res.Group) &&
		exactOrWildcard(rule.APIVersions, res.Version) &&
		matchResource(rule.Resources, res.Resource, r.SubResource)
}

func exactOrWildcard(items []string, requested string) bool {
	for _, item := range items {
		if item == "*" || item == requested {
			return true
		}
	}
	return false
}

// matchScope counts a namespace as cluster-scoped although kube gives a
// namespace's request its own name as namespace.
func matchScope(scope *admissionregistrationv1.ScopeType, r *admissionv1.AdmissionRequest) bool {
	if scope == nil || *scope == admissionregistrationv1.AllScopes {
		return true
	}
	isNamespace := r.Resource == namespacesResource
	switch *scope {
	case admissionregistrationv1.NamespacedScope:
		return !isNamespace && r.Namespace != ""
	case admissionregistrationv1.ClusterScope:
		return isNamespace || r.Namespace == ""
	}
	return false
}

func matchOperation(ops []admissionregistrationv1.OperationType, op admissionv1.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

// matchResource matches "pods" (the resource only), "pods/status",
// "pods/*", "*/status" and "*/*" as kube does.
func matchResource(resources []string, resource, subresource string) bool {
	for _, rs := range resources {
		res, sub, _ := strings.Cut(rs, "/")
		if (res == "*" || res == resource) && (sub == "*" || sub == subresource) {
			return true
		}
	}
	return false
}
