// Package bootstrap holds kube's default RBAC policy as kplane serves it
// (cluster-admin, admin/edit/view and the roles they aggregate, discovery,
// basic-user, public-info-viewer, service-account-issuer-discovery and
// their bindings) and creates what is missing at start, as kube-apiserver's
// rbac/bootstrap-roles post-start hook. Objects that exist are left as
// they are: an operator's change to a default role survives restarts.
package bootstrap
