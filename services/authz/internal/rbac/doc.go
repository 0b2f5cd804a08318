// Package rbac decides requests with Kubernetes RBAC semantics, written in
// Rego and evaluated by OPA, over an in-memory copy of Roles, ClusterRoles,
// RoleBindings and ClusterRoleBindings.
//
// The semantics are kube-apiserver's RBAC authorizer's
// (plugin/pkg/auth/authorizer/rbac and pkg/apis/rbac/v1's evaluation
// helpers): verbs, API groups and resources with "*", "resource/subresource"
// and "*/subresource", resourceNames that only requests naming an object
// match, non-resource URLs exact or by a trailing "*" prefix, RoleBindings
// granting within their namespace and ClusterRoleBindings everywhere, users,
// groups and service accounts as subjects, and aggregated ClusterRoles whose
// rules are the union the aggregation controller would write. Like kube's
// authorizer an Authorizer allows or has no opinion, never denies, and gives
// kube's reasons, so that it chains with other authorizers.
//
// The policy is compiled once; a decision evaluates it with the input only.
// The objects are not in OPA's store: an Index keeps them in Go maps,
// indexed by the user and group names the bindings' subjects stand for, and
// a decision passes the policy only the bindings of the request's user and
// groups, each joined with its role's rules, already converted to Rego
// values. With 10,000 bindings a request typically meets a handful, so the
// cost of a decision follows the bindings of its subjects, not the size of
// the cluster; an update changes one map entry under a short lock instead of
// a store transaction that every evaluation would contend with, and the
// policy itself still makes every semantic check (the index only narrows).
package rbac
