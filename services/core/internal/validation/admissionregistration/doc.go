// Package admissionregistration holds the create and update rules of the
// admissionregistration.k8s.io/v1 kinds (MutatingWebhookConfiguration,
// ValidatingWebhookConfiguration, ValidatingAdmissionPolicy and
// ValidatingAdmissionPolicyBinding) as kube-apiserver applies them: kube's
// v1 defaults, then the structure of webhooks, rules, selectors, client
// configs, policies and bindings, with kube's field paths and messages.
//
// CEL expressions (match conditions, validations, message expressions,
// audit annotation values, variables) are checked for presence and shape
// but not compiled: compiling them as kube does needs kube's CEL
// environment (k8s.io/apiserver/pkg/cel), which this service does not
// carry. An expression that does not compile is accepted here and fails
// when the admission service evaluates it, under the object's
// failurePolicy.
package admissionregistration
