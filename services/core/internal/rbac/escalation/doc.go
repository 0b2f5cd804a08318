// Package escalation is kube's RBAC escalation prevention, as admission on
// writes of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings: a
// user may only grant permissions they hold, unless they may `escalate`
// the role they write or `bind` the role they reference. Members of
// system:masters pass unchecked. What the user holds and may do comes from
// authz over NATS (a SubjectRulesReview and SubjectAccessReviews).
package escalation
