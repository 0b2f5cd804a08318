// Package admissionregistration holds the create and update rules of the
// admissionregistration.k8s.io/v1 kinds (MutatingWebhookConfiguration,
// ValidatingWebhookConfiguration, ValidatingAdmissionPolicy,
// ValidatingAdmissionPolicyBinding, MutatingAdmissionPolicy and
// MutatingAdmissionPolicyBinding) as kube-apiserver applies them: kube's
// v1 defaults, then the structure of webhooks, rules, selectors, client
// configs, policies and bindings, with kube's field paths and messages.
//
// The CEL expressions of a MutatingAdmissionPolicy (match conditions,
// variables, ApplyConfiguration and JSONPatch expressions) are compiled
// as kube compiles them, with kube's CEL libraries
// (k8s.io/apiserver/pkg/admission/plugin/cel and the mutating policy's
// patch types): an expression that does not compile, or does not
// evaluate to what its field needs, is refused with kube's message. On
// update an expression the stored policy already had is compiled in the
// environment of stored expressions, and unchanged match conditions are
// not checked again, as kube does.
//
// The expressions of the other kinds (webhook match conditions,
// validations, message expressions, audit annotation values, variables of
// validating policies) are checked for presence and shape but not yet
// compiled: one that does not compile is accepted here and fails when
// the admission service evaluates it, under the object's failurePolicy.
package admissionregistration
