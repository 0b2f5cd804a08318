// Package rego is the admission service's Rego policies: operators'
// policies, written in Rego (OPA v1), that refuse a write with a message
// or warn about it, on the engine authz's Rego mode uses
// (kplane.dev/libs/regopolicy).
//
// # Contract for policy authors
//
// A policy is a Rego v1 module whose package is kplane.admission, or
// kplane.admission.<name> to keep its helpers to itself. It may define
//
//	deny contains msg if { ... }   # a set of strings
//	warn contains msg if { ... }   # a set of strings
//
// Other rules are the module's own helpers. Every module of every source
// is evaluated for every write of the validating phase (after the
// mutating webhooks, so the object is the one to be stored):
//
//   - Any deny message, of any module, refuses the write with a Kubernetes
//     Status error as kube's admission plugins do (apierrors.NewForbidden
//     with the request's resource, without subresource, and name): 403,
//     reason Forbidden, message `<resource> "<name>" is forbidden: <msgs>`
//     (`<resource> is forbidden: <msgs>` when the request has no name yet,
//     a create with generateName), the messages of all modules sorted,
//     without duplicates, joined by ", ". resource is group-qualified
//     (deployments.apps) outside the core group.
//   - Every warn message, sorted, becomes a warning of the response
//     (kubectl prints "Warning: <msg>"), whether the write is refused or
//     not.
//
// The input is the write as kube's webhooks see it: the JSON of the
// admission.k8s.io/v1 AdmissionRequest of an AdmissionReview, field names
// included, with the objects in it:
//
//	input.uid, input.kind{group,version,kind}, input.resource{group,version,resource},
//	input.subResource, input.requestKind, input.requestResource, input.requestSubResource,
//	input.name, input.namespace, input.operation (CREATE, UPDATE, DELETE, CONNECT),
//	input.userInfo{username,uid,groups,extra}, input.dryRun, input.options,
//	input.object (null on DELETE), input.oldObject (null on CREATE)
//
// exactly as a webhook receives them: the fields kube's JSON leaves out
// when empty (name, namespace, subResource, requestKind, requestResource,
// requestSubResource, dryRun, options) are absent then, so test them with
// `not input.subResource` or object.get(input, "name", "").
//
// An example, in services/admission/policies/require-team-label.rego:
//
//	package kplane.admission.requireteamlabel
//
//	deny contains sprintf("namespace %q has no team label", [input.name]) if {
//		input.operation in {"CREATE", "UPDATE"}
//		input.resource.group == ""
//		input.resource.resource == "namespaces"
//		not input.subResource
//		not input.object.metadata.labels.team
//	}
//
// refuses `kubectl create namespace scratch` with
// `namespaces "scratch" is forbidden: namespace "scratch" has no team label`.
//
// # Failures
//
// A policy that fails at evaluation (a complete rule with two values, a
// message that is not a string) refuses every write it fails on with 500
// InternalError, "the Rego admission policies could not decide the write"
// and OPA's error as the message: a broken policy must not let through
// what it was written to refuse (kube's failurePolicy Fail). A change of
// the modules that does not compile is logged and the last good set stays
// in force; a directory that does not compile at start fails New, so that
// an operator learns of it before the replica serves.
//
// # Sources
//
// Modules come from a directory of *.rego files (polled every second)
// and from the data values of the ConfigMaps labelled
// kplane.dev/admission-policy=true in one namespace (an informer). Each
// change compiles all of them together once; a write evaluates the
// compiled query with its input only. With no module that defines deny
// or warn, a write costs no evaluation at all.
//
// # What is subject to the policies
//
// Every write, the admission configuration kinds included: kube exempts
// ValidatingWebhookConfigurations, ValidatingAdmissionPolicies and the
// like from webhooks and admission policies only, which are themselves
// API objects and could otherwise lock out their own fix, and not from
// the plugins the operator configures. Rego policies are the operator's,
// and guarding who may install a webhook is one of their uses. What
// would lock out a fix here is a policy refusing writes to the policies'
// own ConfigMaps (or failing on every write): so writes to a ConfigMap
// of the policy namespace that carries, or carried, the label
// kplane.dev/admission-policy=true are not subject to the policies.
// Only cluster administrators may write ConfigMaps there, and a
// ConfigMap there that carries the label is a policy, which they may
// write anyway.
package rego
