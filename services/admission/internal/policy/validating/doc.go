// Package validating evaluates the admissionregistration.k8s.io/v1
// ValidatingAdmissionPolicies and their bindings for one write as
// kube-apiserver's ValidatingAdmissionPolicy plugin does, with kube's own
// CEL compiler, validator and rule predicates: matchConstraints and a
// binding's matchResources (resourceRules, excludeResourceRules,
// resourceNames, namespaceSelector, objectSelector), paramKind and
// paramRef, matchConditions, variables, validations with their messages
// and reasons, auditAnnotations, the Deny, Warn and Audit actions, and
// failurePolicy; the refusals, warnings, audit annotations and metrics
// carry kube's wording, codes and names.
//
// The surrounding machinery is kplane's: the policies and bindings come
// from the Policies passed in, the namespaces from Namespaces, the
// params from Params (package params serves them from informers started
// on demand, reading a param the informer lacks from the API server as
// kube does), and each policy is compiled once per generation.
//
// Where it differs from kube:
//
//   - Under matchPolicy Equivalent, a rule with resourceNames matches an
//     equivalent resource only for those names; kube's matcher ignores
//     the names when it matches through an equivalent.
//   - The authorizer variable asks what Config.Authorizer answers (authz,
//     in the service); without one, an expression that reads it fails
//     when evaluated, as an error under failurePolicy.
//   - Kube evaluates the policies in the order of a map; here they go by
//     policy name, then binding name, so that among several refusals the
//     one reported is always the same.
//   - Only writes to the policy kinds themselves (validating and mutating
//     admission policies and their bindings) are exempt, as in kube's
//     policy plugin; writes to webhook configurations are evaluated, as
//     kube evaluates them, unlike the webhook dispatcher, which exempts
//     them too.
//   - A policy or binding whose selectors are nil matches as if they
//     were {}, the API server's default, rather than failing.
//   - A paramKind is resolved when a write meets its policy, not when the
//     policy is stored: the policy's "failed to find resource referenced
//     by paramKind" error is kube's, but appears only while the kind is
//     unknown to Params.
//   - Kube adds warnings and audit annotations to the request as it goes;
//     Validate returns them in its Result, alongside a refusal too.
package validating
