// Package rbac holds the create and update rules of the
// rbac.authorization.k8s.io/v1 kinds (Role, ClusterRole, RoleBinding,
// ClusterRoleBinding) as kube-apiserver applies them: the v1 defaults,
// the shapes of policy rules, aggregation rules, role references and
// subjects, and the immutable roleRef of bindings. Object metadata is the
// REST layer's; names here are path segments, as kube's.
package rbac
