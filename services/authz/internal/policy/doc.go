// Package policy is the Rego mode: operator policies in Rego (OPA v1) that
// allow or deny requests beyond RBAC.
//
// # Contract
//
// A policy is a Rego v1 module whose package is kplane.authz.<name> (any
// name, dotted or not). It may define
//
//	deny contains msg if { ... }   # a set of strings
//	allow if { ... }               # true
//
// Any element of any module's deny set denies the request, with the sorted
// messages joined by ", " as the reason; otherwise an allow that is true
// allows it; otherwise the mode has no opinion and the next mode decides.
// Other rules are the module's own helpers.
//
// The input is the SubjectAccessReview's spec as JSON, the field names of
// authorization.k8s.io/v1, every field listed here present (an empty string
// or list when the spec leaves it out; resourceAttributes and
// nonResourceAttributes only for their kind of request):
//
//	input.user, input.groups, input.uid, input.extra
//	input.resourceAttributes: namespace, verb, group, version, resource, subresource, name
//	input.nonResourceAttributes: path, verb
//
// plus input.namespace = {name, labels, annotations}, the namespace the
// request targets when it is known: for resource "namespaces" of group ""
// with a name, that namespace; otherwise the request's namespace. It is
// absent when the request targets none or the namespace does not exist.
//
// # Sources and reloading
//
// The engine is kplane.dev/libs/regopolicy, shared with the admission
// service's Rego policies; this package is the mode's side of it: the
// rules read, the input, and the decision. Modules come from several
// sources (a directory of *.rego files, polled every second, through
// regopolicy.Dir; ConfigMaps whose data values are modules, through
// regopolicy.ConfigMaps in package feed), each replaced as a whole when it
// changes. Every change compiles all modules together once
// (rego.PrepareForEval); a decision evaluates the prepared query with its
// input only. A change that does not compile, or breaks the contract, is
// logged and the last good set stays in force.
//
// An evaluation error (a policy that fails at run time, for example a
// complete rule with two values) denies the request, the error as the
// reason: a broken policy must not open what it was written to close. The
// authz flag --authorization-policy-failure-mode=NoOpinion restores the
// other choice (no opinion, the next mode decides), for keeping a cluster
// usable while a policy is fixed.
//
// # Who may write policies
//
// Policies decide over RBAC, so only cluster administrators may write
// them: the directory belongs to the operator, and ConfigMap policies are
// read from one namespace only (--authorization-policy-namespace,
// kube-system by default), whose ConfigMaps kube's default roles let no one
// but cluster administrators write. Granting anyone write access to
// ConfigMaps there grants them the cluster.
package policy
