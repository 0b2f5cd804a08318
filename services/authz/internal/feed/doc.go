// Package feed keeps authz's in-memory state current from the API with
// client-go informers: Roles, ClusterRoles, RoleBindings and
// ClusterRoleBindings into an rbac.Index, Namespaces for the policies'
// input.namespace, and the ConfigMaps of the policy namespace labelled
// kplane.dev/authorization-policy=true into the Rego mode (through
// regopolicy.ConfigMaps, which the admission service shares). Each add,
// update or delete is applied at once and reported to a change callback,
// which publishes an invalidation, so that gateways drop decisions made
// on the old state.
package feed
