package admissionregistration

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Kube's v1 defaults (SetObjectDefaults_* of
// pkg/apis/admissionregistration/v1), which kube applies when it decodes
// a request body, so on create and on update alike.

func defaultValidatingWebhookConfiguration(c *admissionv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		h.FailurePolicy = orDefault(h.FailurePolicy, admissionv1.Fail)
		h.MatchPolicy = orDefault(h.MatchPolicy, admissionv1.Equivalent)
		h.NamespaceSelector = orDefault(h.NamespaceSelector, metav1.LabelSelector{})
		h.ObjectSelector = orDefault(h.ObjectSelector, metav1.LabelSelector{})
		h.TimeoutSeconds = orDefault(h.TimeoutSeconds, 10)
		defaultClientConfig(&h.ClientConfig)
		defaultRules(h.Rules)
	}
}

func defaultMutatingWebhookConfiguration(c *admissionv1.MutatingWebhookConfiguration) {
	for i := range c.Webhooks {
		h := &c.Webhooks[i]
		h.FailurePolicy = orDefault(h.FailurePolicy, admissionv1.Fail)
		h.MatchPolicy = orDefault(h.MatchPolicy, admissionv1.Equivalent)
		h.NamespaceSelector = orDefault(h.NamespaceSelector, metav1.LabelSelector{})
		h.ObjectSelector = orDefault(h.ObjectSelector, metav1.LabelSelector{})
		h.TimeoutSeconds = orDefault(h.TimeoutSeconds, 10)
		h.ReinvocationPolicy = orDefault(h.ReinvocationPolicy, admissionv1.NeverReinvocationPolicy)
		defaultClientConfig(&h.ClientConfig)
		defaultRules(h.Rules)
	}
}

func defaultValidatingAdmissionPolicy(p *admissionv1.ValidatingAdmissionPolicy) {
	p.Spec.FailurePolicy = orDefault(p.Spec.FailurePolicy, admissionv1.Fail)
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultValidatingAdmissionPolicyBinding(b *admissionv1.ValidatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
}

func defaultMatchResources(m *admissionv1.MatchResources) {
	if m == nil {
		return
	}
	m.MatchPolicy = orDefault(m.MatchPolicy, admissionv1.Equivalent)
	m.NamespaceSelector = orDefault(m.NamespaceSelector, metav1.LabelSelector{})
	m.ObjectSelector = orDefault(m.ObjectSelector, metav1.LabelSelector{})
	for i := range m.ResourceRules {
		defaultRule(&m.ResourceRules[i].Rule)
	}
	for i := range m.ExcludeResourceRules {
		defaultRule(&m.ExcludeResourceRules[i].Rule)
	}
}

func defaultClientConfig(c *admissionv1.WebhookClientConfig) {
	if c.Service != nil {
		c.Service.Port = orDefault(c.Service.Port, 443)
	}
}

func defaultRules(rules []admissionv1.RuleWithOperations) {
	for i := range rules {
		defaultRule(&rules[i].Rule)
	}
}

func defaultRule(r *admissionv1.Rule) {
	r.Scope = orDefault(r.Scope, admissionv1.AllScopes)
}

func orDefault[T any](p *T, v T) *T {
	if p != nil {
		return p
	}
	return ptr.To(v)
}

func defaultMutatingAdmissionPolicy(p *admissionv1.MutatingAdmissionPolicy) {
	p.Spec.FailurePolicy = orDefault(p.Spec.FailurePolicy, admissionv1.Fail)
	defaultMatchResources(p.Spec.MatchConstraints)
}

func defaultMutatingAdmissionPolicyBinding(b *admissionv1.MutatingAdmissionPolicyBinding) {
	defaultMatchResources(b.Spec.MatchResources)
}
