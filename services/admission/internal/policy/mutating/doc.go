// Package mutating applies MutatingAdmissionPolicies
// (admissionregistration.k8s.io/v1) with their bindings to one write, as
// kube-apiserver's MutatingAdmissionPolicy plugin does, using kube's own
// libraries for the parts that decide outcomes: CEL compilation and
// evaluation (k8s.io/apiserver/pkg/admission/plugin/cel and
// .../webhook/matchconditions), the ApplyConfiguration and JSONPatch
// patchers (.../policy/mutating/patch), and kube's rule matcher
// (.../webhook/predicates/rules). What surrounds them (listing policies,
// matching selectors, collecting params, failure policies, reinvocation,
// the refusal) is written here after kube's generic policy dispatcher and
// mutating dispatcher, with kube's messages.
//
// For each write: every policy whose matchConstraints match and that has
// a binding whose matchResources match is applied once per param of the
// binding (none when the policy has no paramKind or the binding no
// paramRef), in order of policy name then binding name. Its match
// conditions decide whether it applies; its mutations run in order, each
// seeing the object the one before produced. A policy whose rules match
// the write only through an equivalent resource, under matchPolicy
// Equivalent, mutates the write converted to that resource, and the
// policies after it see its change converted back. A policy that cannot be
// applied (a match condition or mutation that fails to compile or
// evaluate, a missing param under parameterNotFoundAction Deny, a
// selector that cannot be evaluated) is dropped under failurePolicy
// Ignore and refuses the write under Fail, with kube's Forbidden whose
// message names the policy and binding. A missing namespace, or a status
// error from a patcher, ends the write whatever the failure policy.
//
// Each policy is compiled once per generation (cached by UID and
// generation; a policy that is gone is forgotten).
//
// Reinvocation: MutateWith with a Reinvocation runs one pass of a
// mutating phase. kube-apiserver runs the whole mutating phase a second
// time when a step changed the object; in the second pass only policies
// with reinvocationPolicy IfNeeded that ran before a change they did not
// see run again. The admission service, which runs these policies before
// the mutating webhooks, passes the same Reinvocation to both passes;
// Changed says whether the policies changed the object in a pass.
//
// ApplyConfiguration needs the schema of the object it merges into. For
// the built-in kinds this service knows (kplane's built-in OpenAPI
// definitions, kplane.dev/libs/apiserver/openapi/builtin) it is kube's
// model, so lists with merge keys merge as kube merges them. For any
// other kind, custom resources included, the schema is deduced from the
// object (managedfields.NewDeducedTypeConverter): maps merge field by
// field, but every list is atomic, so an ApplyConfiguration that sets a
// list of a custom resource replaces the whole list, where kube, which
// reads the CRD's structural schema, would merge a list-map by its keys
// or refuse to touch an atomic list. JSONPatch is exact for any kind.
//
// Where it differs from kube:
//
//   - Under matchPolicy Equivalent, a rule with resourceNames matches an
//     equivalent resource only for those names, as for validating
//     policies.
//   - The authorizer variable asks what Config.Authorizer answers;
//     without one, an expression that uses it fails at run time, under
//     the policy's failurePolicy.
//   - The mutated object is not defaulted after each mutation, as kube
//     defaults typed objects: objects here are unstructured.
//   - A param kind's scope is known only when Params implements
//     ParamScopes; without it the namespace is passed on and kube's
//     errors for a paramRef namespace that does not fit the scope are not
//     given here.
//   - No metrics are recorded; a policy failing open is logged.
package mutating
